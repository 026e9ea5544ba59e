//! Generates Rust codecs for Twinlog's mirror RPCs from JSON schemas in Apache Kafka's
//! message format (`dataplane/messages/*.json`), on kafka-protocol's wire primitives
//! (`protocol::types`) and traits (`Encodable`, `Decodable`, `Message`, `HeaderVersion`,
//! `Request`), the way kafka-protocol's own messages are built.
//!
//! It handles the subset of the format the mirror RPCs use, and refuses anything else
//! with the file and field named: one version (`"validVersions": "0"`), flexible
//! (`"flexibleVersions": "0+"`), fields present in every version, nullable strings and
//! arrays, tagged fields, defaults. Field types: `bool`, `int8`-`int64`, `string`,
//! `uuid`, and arrays of those or of structs. A struct name defined in several files
//! (a response shared by several keys, an entry used by two messages) must have the same
//! fields everywhere; it is generated once. Twinlog's one extension, `responseName`,
//! names a request's response when it is not the request's name with `Request` replaced.
//!
//! Unknown tagged fields are skipped on decode and not kept. A nullable field defaults
//! to null.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use serde_json::Value;

/// Where the schemas live and where the generated module goes, relative to the
/// workspace root.
pub const SCHEMA_DIR: &str = "dataplane/messages";
pub const OUTPUT_FILE: &str = "dataplane/src/wire/mirror/generated.rs";

/// A schema the generator cannot handle, with the file (and field) it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError(pub String);

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SchemaError {}

type Result<T> = std::result::Result<T, SchemaError>;

fn err<T>(msg: impl Into<String>) -> Result<T> {
    Err(SchemaError(msg.into()))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Ty {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    String,
    Uuid,
    Array(Box<Ty>),
    Struct(String),
}

impl Ty {
    fn parse(s: &str, has_fields: bool) -> Result<Ty> {
        if let Some(elem) = s.strip_prefix("[]") {
            let elem = Ty::parse(elem, has_fields)?;
            if matches!(elem, Ty::Array(_)) {
                return err(format!("type {s}: arrays of arrays are not supported"));
            }
            return Ok(Ty::Array(Box::new(elem)));
        }
        Ok(match s {
            "bool" => Ty::Bool,
            "int8" => Ty::Int8,
            "int16" => Ty::Int16,
            "int32" => Ty::Int32,
            "int64" => Ty::Int64,
            "string" => Ty::String,
            "uuid" => Ty::Uuid,
            name if has_fields && name.starts_with(|c: char| c.is_ascii_uppercase()) => {
                Ty::Struct(name.to_string())
            }
            other => return err(format!("type {other} is not supported")),
        })
    }

    fn rust(&self) -> String {
        match self {
            Ty::Bool => "bool".into(),
            Ty::Int8 => "i8".into(),
            Ty::Int16 => "i16".into(),
            Ty::Int32 => "i32".into(),
            Ty::Int64 => "i64".into(),
            Ty::String => "String".into(),
            Ty::Uuid => "uuid::Uuid".into(),
            Ty::Array(elem) => format!("Vec<{}>", elem.rust()),
            Ty::Struct(name) => name.clone(),
        }
    }

    /// The kafka-protocol encoder of this type (flexible versions).
    fn encoder(&self) -> String {
        match self {
            Ty::Bool => "types::Boolean".into(),
            Ty::Int8 => "types::Int8".into(),
            Ty::Int16 => "types::Int16".into(),
            Ty::Int32 => "types::Int32".into(),
            Ty::Int64 => "types::Int64".into(),
            Ty::String => "types::CompactString".into(),
            Ty::Uuid => "types::Uuid".into(),
            Ty::Array(elem) => format!("types::CompactArray({})", elem.encoder()),
            Ty::Struct(_) => "types::Struct { version }".into(),
        }
    }

    fn is_copy(&self) -> bool {
        matches!(
            self,
            Ty::Bool | Ty::Int8 | Ty::Int16 | Ty::Int32 | Ty::Int64
        )
    }

    fn int_range(&self) -> Option<(i64, i64)> {
        Some(match self {
            Ty::Int8 => (i8::MIN.into(), i8::MAX.into()),
            Ty::Int16 => (i16::MIN.into(), i16::MAX.into()),
            Ty::Int32 => (i32::MIN.into(), i32::MAX.into()),
            Ty::Int64 => (i64::MIN, i64::MAX),
            _ => return None,
        })
    }
}

/// A field's default value, as the generator needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DefaultValue {
    /// The type's zero: 0, false, "", empty array, nil uuid.
    Zero,
    Null,
    Int(i64),
    Bool(bool),
    Str(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Field {
    name: String,
    ty: Ty,
    nullable: bool,
    tag: Option<u32>,
    default: DefaultValue,
    about: String,
}

impl Field {
    fn rust_name(&self) -> String {
        snake_case(&self.name)
    }

    fn rust_type(&self) -> String {
        if self.nullable {
            format!("Option<{}>", self.ty.rust())
        } else {
            self.ty.rust()
        }
    }

    fn default_expr(&self) -> String {
        match (&self.default, &self.ty) {
            (DefaultValue::Null, _) => "None".into(),
            (DefaultValue::Int(v), _) => v.to_string(),
            (DefaultValue::Bool(b), _) => b.to_string(),
            (DefaultValue::Str(s), _) => format!("String::from({s:?})"),
            (DefaultValue::Zero, Ty::Bool) => "false".into(),
            (DefaultValue::Zero, Ty::String) => "String::new()".into(),
            (DefaultValue::Zero, Ty::Uuid) => "uuid::Uuid::nil()".into(),
            (DefaultValue::Zero, Ty::Array(_)) => "Vec::new()".into(),
            (DefaultValue::Zero, Ty::Struct(name)) => format!("{name}::default()"),
            (DefaultValue::Zero, _) => "0".into(),
        }
    }

    /// An expression true when the field differs from its default (a tagged field is
    /// written only then).
    fn differs_from_default(&self) -> String {
        let f = format!("self.{}", self.rust_name());
        match (&self.default, &self.ty) {
            (DefaultValue::Null, _) => format!("{f}.is_some()"),
            (DefaultValue::Int(v), _) => format!("{f} != {v}"),
            (DefaultValue::Bool(true), _) => format!("!{f}"),
            (DefaultValue::Bool(false), _) | (DefaultValue::Zero, Ty::Bool) => f,
            (DefaultValue::Str(s), _) => format!("{f} != {s:?}"),
            (DefaultValue::Zero, Ty::String | Ty::Array(_)) => format!("!{f}.is_empty()"),
            (DefaultValue::Zero, Ty::Uuid) => format!("!{f}.is_nil()"),
            (DefaultValue::Zero, Ty::Struct(name)) => format!("{f} != {name}::default()"),
            (DefaultValue::Zero, _) => format!("{f} != 0"),
        }
    }

    /// The field as the encoder's argument.
    fn value(&self) -> String {
        if self.ty.is_copy() && !self.nullable {
            format!("self.{}", self.rust_name())
        } else {
            format!("&self.{}", self.rust_name())
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Request { api_key: i16, response: String },
    Response,
    Inner,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct StructDef {
    name: String,
    about: String,
    kind: Kind,
    fields: Vec<Field>,
}

/// Kafka's schema files carry `//` comment lines, which JSON does not allow.
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn str_key<'a>(obj: &'a serde_json::Map<String, Value>, key: &str, at: &str) -> Result<&'a str> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => err(format!("{at}: \"{key}\" must be a string")),
        None => err(format!("{at}: \"{key}\" is missing")),
    }
}

fn check_keys(obj: &serde_json::Map<String, Value>, allowed: &[&str], at: &str) -> Result<()> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => err(format!("{at}: key \"{k}\" is not supported")),
        None => Ok(()),
    }
}

const FIELD_KEYS: &[&str] = &[
    "name",
    "type",
    "versions",
    "nullableVersions",
    "taggedVersions",
    "tag",
    "default",
    "about",
    "fields",
    "ignorable",
];

const TOP_KEYS: &[&str] = &[
    "apiKey",
    "type",
    "listeners",
    "name",
    "validVersions",
    "flexibleVersions",
    "responseName",
    "fields",
];

fn parse_default(ty: &Ty, nullable: bool, value: Option<&Value>, at: &str) -> Result<DefaultValue> {
    let text = match value {
        None => {
            return Ok(if nullable {
                DefaultValue::Null
            } else {
                DefaultValue::Zero
            })
        }
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(_) => return err(format!("{at}: \"default\" must be a string")),
    };
    if nullable {
        return match text.as_str() {
            "null" => Ok(DefaultValue::Null),
            _ => err(format!("{at}: a nullable field's default must be \"null\"")),
        };
    }
    if let Some((min, max)) = ty.int_range() {
        return match text.parse::<i64>() {
            Ok(0) => Ok(DefaultValue::Zero),
            Ok(v) if (min..=max).contains(&v) => Ok(DefaultValue::Int(v)),
            _ => err(format!("{at}: default {text:?} is not a {}", ty.rust())),
        };
    }
    match ty {
        Ty::Bool => match text.as_str() {
            "false" => Ok(DefaultValue::Zero),
            "true" => Ok(DefaultValue::Bool(true)),
            _ => err(format!("{at}: default {text:?} is not a bool")),
        },
        Ty::String if text.is_empty() => Ok(DefaultValue::Zero),
        Ty::String => Ok(DefaultValue::Str(text)),
        _ => err(format!("{at}: a {} field takes no default", ty.rust())),
    }
}

/// Parses `fields`, adding every struct they define to `structs`.
fn parse_fields(
    value: Option<&Value>,
    at: &str,
    structs: &mut Vec<StructDef>,
) -> Result<Vec<Field>> {
    let Some(Value::Array(items)) = value else {
        return err(format!("{at}: \"fields\" must be an array"));
    };
    let mut fields = Vec::with_capacity(items.len());
    for item in items {
        let Value::Object(obj) = item else {
            return err(format!("{at}: a field must be an object"));
        };
        let name = str_key(obj, "name", at)?.to_string();
        let at = format!("{at}.{name}");
        check_keys(obj, FIELD_KEYS, &at)?;
        if str_key(obj, "versions", &at)? != "0+" {
            return err(format!("{at}: only \"versions\": \"0+\" is supported"));
        }
        let nullable = match obj.get("nullableVersions") {
            None => false,
            Some(Value::String(v)) if v == "0+" => true,
            Some(_) => {
                return err(format!(
                    "{at}: only \"nullableVersions\": \"0+\" is supported"
                ))
            }
        };
        let tag = match (obj.get("taggedVersions"), obj.get("tag")) {
            (None, None) => None,
            (Some(Value::String(v)), Some(Value::Number(n))) if v == "0+" => {
                match n.as_u64().and_then(|n| u32::try_from(n).ok()) {
                    Some(tag) => Some(tag),
                    None => return err(format!("{at}: \"tag\" must be an unsigned 32-bit number")),
                }
            }
            _ => {
                return err(format!(
                    "{at}: a tagged field needs \"taggedVersions\": \"0+\" and a \"tag\""
                ))
            }
        };
        let has_fields = obj.contains_key("fields");
        let ty = Ty::parse(str_key(obj, "type", &at)?, has_fields)
            .map_err(|e| SchemaError(format!("{at}: {e}")))?;
        if nullable && !matches!(ty, Ty::String | Ty::Array(_)) {
            return err(format!("{at}: only strings and arrays can be nullable"));
        }
        let struct_name = match &ty {
            Ty::Array(elem) => match elem.as_ref() {
                Ty::Struct(name) => Some(name.clone()),
                _ => None,
            },
            Ty::Struct(_) => return err(format!("{at}: a struct must be in an array")),
            _ => None,
        };
        match (struct_name, has_fields) {
            (Some(struct_name), true) => {
                let inner = parse_fields(obj.get("fields"), &at, structs)?;
                add_struct(
                    structs,
                    StructDef {
                        name: struct_name,
                        about: String::new(),
                        kind: Kind::Inner,
                        fields: inner,
                    },
                )?;
            }
            (None, false) => {}
            (Some(_), false) => return err(format!("{at}: a struct array needs \"fields\"")),
            (None, true) => return err(format!("{at}: only struct arrays have \"fields\"")),
        }
        let default = parse_default(&ty, nullable, obj.get("default"), &at)?;
        let about = match obj.get("about") {
            Some(Value::String(s)) => s.clone(),
            _ => String::new(),
        };
        fields.push(Field {
            name,
            ty,
            nullable,
            tag,
            default,
            about,
        });
    }
    let mut tags: Vec<u32> = fields.iter().filter_map(|f| f.tag).collect();
    tags.sort_unstable();
    if tags.windows(2).any(|w| w[0] == w[1]) {
        return err(format!("{at}: two fields share a tag"));
    }
    Ok(fields)
}

/// Adds `def`, or checks it matches the struct of the same name already added.
fn add_struct(structs: &mut Vec<StructDef>, def: StructDef) -> Result<()> {
    match structs.iter_mut().find(|s| s.name == def.name) {
        None => structs.push(def),
        Some(seen) if seen.fields != def.fields => {
            return err(format!(
                "struct {} is defined twice with different fields",
                def.name
            ))
        }
        Some(seen) if seen.kind == Kind::Inner => {
            seen.kind = def.kind;
            seen.about = def.about;
        }
        Some(seen) if def.kind != Kind::Inner && seen.kind != def.kind => {
            return err(format!("message {} is defined twice", def.name))
        }
        Some(_) => {}
    }
    Ok(())
}

fn parse_schema(file: &str, text: &str, structs: &mut Vec<StructDef>) -> Result<()> {
    let value: Value = serde_json::from_str(&strip_comments(text))
        .map_err(|e| SchemaError(format!("{file}: {e}")))?;
    let Value::Object(obj) = value else {
        return err(format!("{file}: a schema is a JSON object"));
    };
    check_keys(&obj, TOP_KEYS, file)?;
    let name = str_key(&obj, "name", file)?.to_string();
    if str_key(&obj, "validVersions", file)? != "0" {
        return err(format!(
            "{file}: only \"validVersions\": \"0\" is supported"
        ));
    }
    if str_key(&obj, "flexibleVersions", file)? != "0+" {
        return err(format!(
            "{file}: only \"flexibleVersions\": \"0+\" is supported"
        ));
    }
    let api_key = match obj.get("apiKey").and_then(Value::as_i64) {
        Some(k) => i16::try_from(k).map_err(|_| SchemaError(format!("{file}: apiKey {k}")))?,
        None => return err(format!("{file}: \"apiKey\" must be a number")),
    };
    let kind = match str_key(&obj, "type", file)? {
        "request" => {
            let response = match obj.get("responseName") {
                Some(Value::String(r)) => r.clone(),
                Some(_) => return err(format!("{file}: \"responseName\" must be a string")),
                None => match name.strip_suffix("Request") {
                    Some(stem) => format!("{stem}Response"),
                    None => return err(format!("{file}: a request's name ends in Request")),
                },
            };
            Kind::Request { api_key, response }
        }
        "response" => Kind::Response,
        other => return err(format!("{file}: type {other:?} is not request or response")),
    };
    let fields = parse_fields(obj.get("fields"), &name, structs)?;
    let about = match &kind {
        Kind::Request { api_key, .. } => format!("{name} (API key {api_key}, version 0)."),
        _ => format!("{name} (version 0)."),
    };
    add_struct(
        structs,
        StructDef {
            name,
            about,
            kind,
            fields,
        },
    )
}

fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn doc(out: &mut String, indent: &str, text: &str) {
    if !text.is_empty() {
        let _ = writeln!(out, "{indent}/// {text}");
    }
}

fn emit_struct(out: &mut String, def: &StructDef) {
    let derive_default = def.fields.iter().all(|f| {
        matches!(f.default, DefaultValue::Zero) || (f.nullable && f.default == DefaultValue::Null)
    });
    doc(out, "", &def.about);
    let derives = if derive_default {
        "Debug, Clone, Default, PartialEq, Eq"
    } else {
        "Debug, Clone, PartialEq, Eq"
    };
    let _ = writeln!(out, "#[derive({derives})]");
    let _ = writeln!(out, "pub struct {} {{", def.name);
    for f in &def.fields {
        let about = match f.tag {
            Some(tag) => format!("{} (tag {tag})", f.about),
            None => f.about.clone(),
        };
        doc(out, "    ", &about);
        let _ = writeln!(out, "    pub {}: {},", f.rust_name(), f.rust_type());
    }
    out.push_str("}\n\n");

    if !derive_default {
        let _ = writeln!(out, "impl Default for {} {{", def.name);
        out.push_str("    fn default() -> Self {\n");
        let _ = writeln!(out, "        {} {{", def.name);
        for f in &def.fields {
            let _ = writeln!(out, "            {}: {},", f.rust_name(), f.default_expr());
        }
        out.push_str("        }\n    }\n}\n\n");
    }

    let top = def.kind != Kind::Inner;
    let version_check = |out: &mut String| {
        if top {
            let _ = writeln!(
                out,
                "        if version != 0 {{\n            bail!(\"{} v{{version}} is not supported (v0 only)\");\n        }}",
                def.name
            );
        }
    };
    let version_arg = if top || uses_version(def) {
        "version"
    } else {
        "_version"
    };
    let tagged: Vec<&Field> = def.fields.iter().filter(|f| f.tag.is_some()).collect();
    let mut ordered = tagged.clone();
    ordered.sort_by_key(|f| f.tag);

    // Encodable
    let _ = writeln!(out, "impl Encodable for {} {{", def.name);
    let _ = writeln!(
        out,
        "    fn encode<B: ByteBufMut>(&self, buf: &mut B, {version_arg}: i16) -> Result<()> {{"
    );
    version_check(out);
    for f in def.fields.iter().filter(|f| f.tag.is_none()) {
        let _ = writeln!(
            out,
            "        {}.encode(buf, {})?;",
            f.ty.encoder(),
            f.value()
        );
    }
    if ordered.is_empty() {
        out.push_str("        types::UnsignedVarInt.encode(buf, 0u32)?;\n");
    } else {
        out.push_str("        let mut num_tagged_fields = 0u32;\n");
        for f in &ordered {
            let _ = writeln!(
                out,
                "        if {} {{\n            num_tagged_fields += 1;\n        }}",
                f.differs_from_default()
            );
        }
        out.push_str("        types::UnsignedVarInt.encode(buf, num_tagged_fields)?;\n");
        for f in &ordered {
            let enc = f.ty.encoder();
            let _ = writeln!(out, "        if {} {{", f.differs_from_default());
            let _ = writeln!(
                out,
                "            let size = u32::try_from({enc}.compute_size({})?)?;",
                f.value()
            );
            let _ = writeln!(
                out,
                "            types::UnsignedVarInt.encode(buf, {}u32)?;",
                f.tag.unwrap_or_default()
            );
            out.push_str("            types::UnsignedVarInt.encode(buf, size)?;\n");
            let _ = writeln!(out, "            {enc}.encode(buf, {})?;", f.value());
            out.push_str("        }\n");
        }
    }
    out.push_str("        Ok(())\n    }\n\n");
    let _ = writeln!(
        out,
        "    fn compute_size(&self, {version_arg}: i16) -> Result<usize> {{"
    );
    version_check(out);
    out.push_str("        let mut size = 0;\n");
    for f in def.fields.iter().filter(|f| f.tag.is_none()) {
        let _ = writeln!(
            out,
            "        size += {}.compute_size({})?;",
            f.ty.encoder(),
            f.value()
        );
    }
    if ordered.is_empty() {
        out.push_str("        size += types::UnsignedVarInt.compute_size(0u32)?;\n");
    } else {
        out.push_str("        let mut num_tagged_fields = 0u32;\n");
        for f in &ordered {
            let enc = f.ty.encoder();
            let _ = writeln!(out, "        if {} {{", f.differs_from_default());
            out.push_str("            num_tagged_fields += 1;\n");
            let _ = writeln!(
                out,
                "            let value = u32::try_from({enc}.compute_size({})?)?;",
                f.value()
            );
            let _ = writeln!(
                out,
                "            size += types::UnsignedVarInt.compute_size({}u32)?;",
                f.tag.unwrap_or_default()
            );
            out.push_str("            size += types::UnsignedVarInt.compute_size(value)?;\n");
            out.push_str("            size += value as usize;\n");
            out.push_str("        }\n");
        }
        out.push_str("        size += types::UnsignedVarInt.compute_size(num_tagged_fields)?;\n");
    }
    out.push_str("        Ok(size)\n    }\n}\n\n");

    // Decodable
    let _ = writeln!(out, "impl Decodable for {} {{", def.name);
    let _ = writeln!(
        out,
        "    fn decode<B: ByteBuf>(buf: &mut B, {version_arg}: i16) -> Result<Self> {{"
    );
    version_check(out);
    for f in &def.fields {
        match f.tag {
            None => {
                let _ = writeln!(
                    out,
                    "        let {}: {} = {}.decode(buf)?;",
                    f.rust_name(),
                    f.rust_type(),
                    f.ty.encoder()
                );
            }
            Some(_) => {
                let _ = writeln!(
                    out,
                    "        let mut {}: {} = {};",
                    f.rust_name(),
                    f.rust_type(),
                    f.default_expr()
                );
            }
        }
    }
    out.push_str("        let num_tagged_fields: u32 = types::UnsignedVarInt.decode(buf)?;\n");
    out.push_str("        for _ in 0..num_tagged_fields {\n");
    if ordered.is_empty() {
        out.push_str("            let _tag: u32 = types::UnsignedVarInt.decode(buf)?;\n");
        out.push_str("            let size: u32 = types::UnsignedVarInt.decode(buf)?;\n");
        out.push_str("            buf.try_get_bytes(size as usize)?;\n");
    } else {
        out.push_str("            let tag: u32 = types::UnsignedVarInt.decode(buf)?;\n");
        out.push_str("            let size: u32 = types::UnsignedVarInt.decode(buf)?;\n");
        out.push_str("            let mut value = buf.try_get_bytes(size as usize)?;\n");
        out.push_str("            let known = match tag {\n");
        for f in &ordered {
            let _ = writeln!(
                out,
                "                {} => {{\n                    {} = {}.decode(&mut value)?;\n                    true\n                }}",
                f.tag.unwrap_or_default(),
                f.rust_name(),
                f.ty.encoder()
            );
        }
        out.push_str("                _ => false,\n            };\n");
        let _ = writeln!(
            out,
            "            if known && value.has_remaining() {{\n                bail!(\"{}: tagged field {{tag}} has {{}} bytes past its value\", value.remaining());\n            }}",
            def.name
        );
    }
    out.push_str("        }\n");
    let _ = writeln!(out, "        Ok({} {{", def.name);
    for f in &def.fields {
        let _ = writeln!(out, "            {},", f.rust_name());
    }
    out.push_str("        })\n    }\n}\n\n");

    match &def.kind {
        Kind::Inner => {}
        kind => {
            let _ = writeln!(
                out,
                "impl Message for {} {{\n    const VERSIONS: VersionRange = VersionRange {{ min: 0, max: 0 }};\n    const DEPRECATED_VERSIONS: Option<VersionRange> = None;\n}}\n",
                def.name
            );
            let header = if matches!(kind, Kind::Response) { 1 } else { 2 };
            let _ = writeln!(
                out,
                "impl HeaderVersion for {} {{\n    fn header_version(_version: i16) -> i16 {{\n        {header}\n    }}\n}}\n",
                def.name
            );
            if let Kind::Request { api_key, response } = kind {
                let _ = writeln!(
                    out,
                    "impl Request for {} {{\n    const KEY: i16 = {api_key};\n    type Response = {response};\n}}\n",
                    def.name
                );
            }
        }
    }
}

/// Whether encoding `def` passes the version on (to a nested struct).
fn uses_version(def: &StructDef) -> bool {
    def.fields
        .iter()
        .any(|f| matches!(&f.ty, Ty::Array(e) if matches!(e.as_ref(), Ty::Struct(_))))
}

/// Generates the module for the schemas `(file name, text)`, in file-name order.
pub fn generate(schemas: &[(String, String)]) -> Result<String> {
    let mut sorted: Vec<&(String, String)> = schemas.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut structs = Vec::new();
    for (file, text) in sorted {
        parse_schema(file, text, &mut structs)?;
    }
    let names: BTreeMap<&str, &StructDef> = structs.iter().map(|s| (s.name.as_str(), s)).collect();
    for def in &structs {
        if let Kind::Request { response, .. } = &def.kind {
            match names.get(response.as_str()) {
                Some(r) if r.kind == Kind::Response => {}
                _ => return err(format!("{}: no response schema {response}", def.name)),
            }
        }
    }
    let mut out = String::new();
    out.push_str(
        "// @generated by twinlog-codegen (codegen/) from dataplane/messages/*.json. Do not edit:\n\
         // change a schema and run `cargo run -p twinlog-codegen`.\n\n\
         use anyhow::{bail, Result};\n\
         use bytes::Buf;\n\
         use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};\n\
         use kafka_protocol::protocol::{\n    \
         types, Decodable, Decoder, Encodable, Encoder, HeaderVersion, Message, Request, VersionRange,\n\
         };\n\n",
    );
    for def in names.values() {
        emit_struct(&mut out, def);
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    Ok(out)
}

/// Reads every `*.json` schema in `dir`.
pub fn read_schemas(dir: &Path) -> std::io::Result<Vec<(String, String)>> {
    let mut schemas = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            schemas.push((name, fs::read_to_string(&path)?));
        }
    }
    Ok(schemas)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Result<String> {
        generate(&[("X.json".to_string(), text.to_string())])
    }

    const HEAD: &str = r#""apiKey": 1, "type": "response", "name": "XResponse",
        "validVersions": "0", "flexibleVersions": "0+""#;

    #[test]
    fn snake_case_of_kafka_field_names() {
        assert_eq!(
            snake_case("StateValidationOffset"),
            "state_validation_offset"
        );
        assert_eq!(snake_case("LagMs"), "lag_ms");
    }

    #[test]
    fn comment_lines_are_allowed() {
        let text = format!("// licence\n{{ {HEAD},\n  // a note\n  \"fields\": [] }}");
        assert!(one(&text).is_ok());
    }

    #[test]
    fn unsupported_versions_are_refused_with_the_file_named() {
        let text = HEAD.replace("\"validVersions\": \"0\"", "\"validVersions\": \"0-1\"");
        let e = one(&format!("{{ {text}, \"fields\": [] }}")).expect_err("refused");
        assert!(
            e.0.contains("X.json") && e.0.contains("validVersions"),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_type_names_the_field() {
        let text = format!(
            "{{ {HEAD}, \"fields\": [{{ \"name\": \"A\", \"type\": \"float64\", \"versions\": \"0+\" }}] }}"
        );
        let e = one(&text).expect_err("refused");
        assert!(
            e.0.contains("XResponse.A") && e.0.contains("float64"),
            "{e}"
        );
    }

    #[test]
    fn a_struct_defined_twice_differently_is_refused() {
        let a = format!(
            "{{ {HEAD}, \"fields\": [{{ \"name\": \"S\", \"type\": \"[]Entry\", \"versions\": \"0+\", \"fields\": [{{ \"name\": \"A\", \"type\": \"int32\", \"versions\": \"0+\" }}] }}] }}"
        );
        let b = a
            .replace("XResponse", "YResponse")
            .replace("int32", "int64");
        let e = generate(&[("X.json".into(), a), ("Y.json".into(), b)]).expect_err("refused");
        assert!(e.0.contains("Entry"), "{e}");
    }

    #[test]
    fn a_request_needs_its_response() {
        let text = r#"{ "apiKey": 1, "type": "request", "name": "XRequest",
            "validVersions": "0", "flexibleVersions": "0+", "fields": [] }"#;
        let e = one(text).expect_err("refused");
        assert!(e.0.contains("XResponse"), "{e}");
    }

    #[test]
    fn tagged_fields_need_distinct_tags() {
        let text = format!(
            "{{ {HEAD}, \"fields\": [
              {{ \"name\": \"A\", \"type\": \"int32\", \"versions\": \"0+\", \"taggedVersions\": \"0+\", \"tag\": 0 }},
              {{ \"name\": \"B\", \"type\": \"int32\", \"versions\": \"0+\", \"taggedVersions\": \"0+\", \"tag\": 0 }}] }}"
        );
        assert!(one(&text).expect_err("refused").0.contains("share a tag"));
    }
}
