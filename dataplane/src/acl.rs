//! Kafka's ACL model and the rules of its StandardAuthorizer: resource types, pattern
//! types, operations and permissions with Kafka's wire codes; [`AclSet`], the ACLs of
//! the cluster as the metadata image holds them, indexed for [`AclSet::authorize`]; and
//! [`AclFilter`], the filters of DescribeAcls and DeleteAcls.
//!
//! The decision for one action (principal, host, operation, resource):
//! 1. a super user may do anything;
//! 2. the ACLs that apply are those on the literal name, on the literal wildcard `*`
//!    and on every prefix of the name (PREFIXED);
//! 3. none at all (whoever they are for): `allow.everyone.if.no.acl.found` decides;
//! 4. a matching DENY wins over any ALLOW; else a matching ALLOW allows; else denied.
//!
//! An ACL matches when its principal is the session's or `User:*`, its host is the
//! client's address or `*`, and its operation is the action's or ALL. An ALLOW of READ,
//! WRITE, DELETE or ALTER also allows DESCRIBE, and an ALLOW of ALTER_CONFIGS allows
//! DESCRIBE_CONFIGS; a DENY implies nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The name of the one CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The resource name and host that match any.
pub const WILDCARD: &str = "*";
/// The principal that matches any user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $code:literal => $label:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code),+
                }
            }

            pub fn from_code(code: i8) -> Option<$name> {
                match code {
                    $($code => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// Kafka's name, as `kafka-acls` prints it.
            pub fn label(self) -> &'static str {
                match self {
                    $($name::$variant => $label),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.label())
            }
        }
    };
}

wire_enum! {
    /// What an ACL is on (code 1, ANY, exists only in filters).
    ResourceType {
        Topic = 2 => "TOPIC",
        Group = 3 => "GROUP",
        Cluster = 4 => "CLUSTER",
        TransactionalId = 5 => "TRANSACTIONAL_ID",
        DelegationToken = 6 => "DELEGATION_TOKEN",
        User = 7 => "USER",
        ClusterMirror = 8 => "CLUSTER_MIRROR",
    }
}

wire_enum! {
    /// How an ACL's resource name matches (codes 1 ANY and 2 MATCH exist only in
    /// filters).
    PatternType {
        Literal = 3 => "LITERAL",
        Prefixed = 4 => "PREFIXED",
    }
}

wire_enum! {
    /// What an ACL allows or denies (code 1, ANY, exists only in filters).
    Operation {
        All = 2 => "ALL",
        Read = 3 => "READ",
        Write = 4 => "WRITE",
        Create = 5 => "CREATE",
        Delete = 6 => "DELETE",
        Alter = 7 => "ALTER",
        Describe = 8 => "DESCRIBE",
        ClusterAction = 9 => "CLUSTER_ACTION",
        DescribeConfigs = 10 => "DESCRIBE_CONFIGS",
        AlterConfigs = 11 => "ALTER_CONFIGS",
        IdempotentWrite = 12 => "IDEMPOTENT_WRITE",
        CreateTokens = 13 => "CREATE_TOKENS",
        DescribeTokens = 14 => "DESCRIBE_TOKENS",
    }
}

wire_enum! {
    /// Whether an ACL allows or denies (code 1, ANY, exists only in filters).
    Permission {
        Deny = 2 => "DENY",
        Allow = 3 => "ALLOW",
    }
}

/// The filter code meaning "any" of the resource type, pattern type, operation and
/// permission enums.
pub const ANY_CODE: i8 = 1;
/// The pattern-type filter code MATCH: the ACLs that would apply to a named resource.
pub const MATCH_CODE: i8 = 2;

impl ResourceType {
    /// The operations an ACL on this resource type can name, as Kafka lists them for the
    /// `authorized_operations` fields (ALL excluded).
    pub fn operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            ResourceType::ClusterMirror => &[
                Create,
                Delete,
                Alter,
                Describe,
                DescribeConfigs,
                AlterConfigs,
            ],
        }
    }
}

/// One ACL: a resource pattern and an access-control entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `Type:name`, e.g. `User:alice`; `User:*` is any user.
    pub principal: String,
    /// The client's IP address, or `*`.
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

/// Why a binding from the wire is not a valid ACL (Kafka answers INVALID_REQUEST).
pub type InvalidAcl = String;

impl AclBinding {
    /// A binding from the wire codes of CreateAcls, checked as Kafka's controller checks
    /// a new ACL.
    #[allow(clippy::too_many_arguments)]
    pub fn from_wire(
        resource_type: i8,
        resource_name: &str,
        pattern_type: i8,
        principal: &str,
        host: &str,
        operation: i8,
        permission: i8,
    ) -> Result<AclBinding, InvalidAcl> {
        let resource_type = ResourceType::from_code(resource_type)
            .ok_or_else(|| format!("Invalid resourceType {resource_type}"))?;
        let pattern_type = PatternType::from_code(pattern_type)
            .ok_or_else(|| format!("Invalid patternType {pattern_type}"))?;
        let operation = Operation::from_code(operation)
            .ok_or_else(|| format!("Invalid operation {operation}"))?;
        let permission = Permission::from_code(permission)
            .ok_or_else(|| format!("Invalid permissionType {permission}"))?;
        if resource_name.is_empty() {
            return Err("Resource name should not be empty".into());
        }
        check_principal(principal)?;
        if host.is_empty() {
            return Err("Host should not be empty".into());
        }
        if resource_type == ResourceType::Cluster && resource_name != CLUSTER_NAME {
            return Err(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            ));
        }
        Ok(AclBinding {
            resource_type,
            resource_name: resource_name.to_owned(),
            pattern_type,
            principal: principal.to_owned(),
            host: host.to_owned(),
            operation,
            permission,
        })
    }

    /// Whether this ACL decides `operation` for `principal` at `host`: `Some(true)`
    /// allows, `Some(false)` denies, `None` does not apply.
    fn decides(&self, principal: &str, host: &str, operation: Operation) -> Option<bool> {
        if self.principal != principal && self.principal != WILDCARD_PRINCIPAL {
            return None;
        }
        if self.host != WILDCARD && self.host != host {
            return None;
        }
        let allow = self.permission == Permission::Allow;
        let covers = self.operation == Operation::All
            || self.operation == operation
            || (allow && implies(self.operation, operation));
        covers.then_some(allow)
    }
}

/// Whether every resource `inner`'s pattern names is also named by `outer`'s.
fn covers(outer: &AclBinding, inner: &AclBinding) -> bool {
    match outer.pattern_type {
        PatternType::Literal => {
            outer.resource_name == WILDCARD
                || (inner.pattern_type == PatternType::Literal
                    && outer.resource_name == inner.resource_name)
        }
        PatternType::Prefixed => inner.resource_name.starts_with(&outer.resource_name),
    }
}

/// Whether an ALLOW of `granted` also allows `wanted`.
fn implies(granted: Operation, wanted: Operation) -> bool {
    use Operation::*;
    match wanted {
        Describe => matches!(granted, Read | Write | Delete | Alter),
        DescribeConfigs => granted == AlterConfigs,
        _ => false,
    }
}

/// A principal must be `Type:name` with both parts present.
fn check_principal(principal: &str) -> Result<(), InvalidAcl> {
    match principal.split_once(':') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(()),
        _ => Err(format!(
            "Could not parse principal from `{principal}` (no colon is present separating the principal type from the principal name)"
        )),
    }
}

/// How a filter matches resource names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternFilter {
    /// Any pattern type.
    Any,
    /// The ACLs that would apply to the named resource: its literal name, the literal
    /// wildcard and the prefixes of the name.
    Match,
    Exactly(PatternType),
}

/// A DescribeAcls or DeleteAcls filter: `None` fields match anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub resource_name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
}

impl AclFilter {
    /// A filter from the wire codes of DescribeAcls / DeleteAcls.
    #[allow(clippy::too_many_arguments)]
    pub fn from_wire(
        resource_type: i8,
        resource_name: Option<&str>,
        pattern_type: i8,
        principal: Option<&str>,
        host: Option<&str>,
        operation: i8,
        permission: i8,
    ) -> Result<AclFilter, InvalidAcl> {
        fn any_or<T>(
            code: i8,
            what: &str,
            parse: fn(i8) -> Option<T>,
        ) -> Result<Option<T>, InvalidAcl> {
            if code == ANY_CODE {
                return Ok(None);
            }
            parse(code)
                .map(Some)
                .ok_or_else(|| format!("Invalid {what} {code} in the filter"))
        }
        let pattern = match pattern_type {
            ANY_CODE => PatternFilter::Any,
            MATCH_CODE => PatternFilter::Match,
            code => PatternFilter::Exactly(
                PatternType::from_code(code)
                    .ok_or_else(|| format!("Invalid patternType {code} in the filter"))?,
            ),
        };
        if pattern == PatternFilter::Match && resource_name.is_none() {
            return Err("A MATCH filter needs a resource name".into());
        }
        if let Some(p) = principal {
            check_principal(p)?;
        }
        Ok(AclFilter {
            resource_type: any_or(resource_type, "resourceType", ResourceType::from_code)?,
            resource_name: resource_name.map(str::to_owned),
            pattern,
            principal: principal.map(str::to_owned),
            host: host.map(str::to_owned),
            operation: any_or(operation, "operation", Operation::from_code)?,
            permission: any_or(permission, "permissionType", Permission::from_code)?,
        })
    }

    /// Kafka's `AclBindingFilter.matches`.
    pub fn matches(&self, acl: &AclBinding) -> bool {
        let equal = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        let resource = self.resource_type.is_none_or(|t| t == acl.resource_type)
            && match self.pattern {
                PatternFilter::Any => equal(&self.resource_name, &acl.resource_name),
                PatternFilter::Exactly(p) => {
                    p == acl.pattern_type && equal(&self.resource_name, &acl.resource_name)
                }
                PatternFilter::Match => {
                    let name = self.resource_name.as_deref().unwrap_or_default();
                    match acl.pattern_type {
                        PatternType::Literal => {
                            acl.resource_name == name || acl.resource_name == WILDCARD
                        }
                        PatternType::Prefixed => name.starts_with(&acl.resource_name),
                    }
                }
            };
        resource
            && equal(&self.principal, &acl.principal)
            && equal(&self.host, &acl.host)
            && self.operation.is_none_or(|o| o == acl.operation)
            && self.permission.is_none_or(|p| p == acl.permission)
    }
}

/// A stamp no other ACL set of this process has: sets rebuilt from a snapshot must not
/// pass for ones a connection cached decisions of.
fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Where an ACL a mirror's ACL sync made came from: the mirror, and whether it is held
/// (kept, but granting nothing) because it would let principals write to topics that
/// are still read-only mirrors. Failing those topics over releases it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MirroredAcl {
    pub mirror: String,
    pub held: bool,
}

/// One change a mirror's ACL sync asks of the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorAclChange {
    /// Create this source ACL here, held or not, unless an equal one exists.
    Create { acl: AclBinding, held: bool },
    /// Hold or release an ACL the mirror made.
    SetHeld { id: uuid::Uuid, held: bool },
    /// Delete an ACL the mirror made (the source no longer has it).
    Delete { id: uuid::Uuid },
}

/// Whether `acl`'s resource pattern names the resource `name` (of its type).
pub fn names(acl: &AclBinding, name: &str) -> bool {
    match acl.pattern_type {
        PatternType::Literal => acl.resource_name == WILDCARD || acl.resource_name == name,
        PatternType::Prefixed => name.starts_with(&acl.resource_name),
    }
}

/// Whether `acl` lets someone write to topic `topic`: an ALLOW of WRITE or ALL on a
/// TOPIC pattern that names it. A mirror holds such ACLs while `topic` is read-only.
pub fn allows_write_to(acl: &AclBinding, topic: &str) -> bool {
    acl.resource_type == ResourceType::Topic
        && acl.permission == Permission::Allow
        && matches!(acl.operation, Operation::Write | Operation::All)
        && names(acl, topic)
}

/// The cluster's ACLs by id, indexed by resource for [`AclSet::authorize`]. Immutable
/// once in an image; the control plane builds a new one for every ACL change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclSet {
    by_id: BTreeMap<uuid::Uuid, AclBinding>,
    /// Held ACLs (see [`MirroredAcl`]): in no index and not listed by DescribeAcls.
    held: BTreeMap<uuid::Uuid, AclBinding>,
    /// The ACLs (active or held) a mirror's ACL sync made.
    mirrored: BTreeMap<uuid::Uuid, MirroredAcl>,
    /// The ACLs of each literal resource name (including `*`).
    literal: HashMap<(ResourceType, String), Vec<uuid::Uuid>>,
    /// The ACLs of each prefix.
    prefixed: HashMap<(ResourceType, String), Vec<uuid::Uuid>>,
    /// The lengths (in bytes) of the prefixes of each resource type, so a check looks up
    /// only prefixes that have ACLs.
    prefix_lengths: BTreeMap<ResourceType, BTreeSet<usize>>,
    /// Changes with every change (to a process-wide unique value), so decision caches
    /// know when they are stale.
    generation: u64,
}

impl AclSet {
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn iter(&self) -> impl Iterator<Item = (&uuid::Uuid, &AclBinding)> {
        self.by_id.iter()
    }

    pub fn get(&self, id: &uuid::Uuid) -> Option<&AclBinding> {
        self.by_id.get(id)
    }

    /// Whether an identical ACL exists (CreateAcls of one is a no-op, as in Kafka).
    pub fn contains(&self, acl: &AclBinding) -> bool {
        self.index_of(acl)
            .get(&(acl.resource_type, acl.resource_name.clone()))
            .is_some_and(|ids| ids.iter().any(|id| self.by_id.get(id) == Some(acl)))
    }

    fn index_of(&self, acl: &AclBinding) -> &HashMap<(ResourceType, String), Vec<uuid::Uuid>> {
        match acl.pattern_type {
            PatternType::Literal => &self.literal,
            PatternType::Prefixed => &self.prefixed,
        }
    }

    /// Kafka's `authorizeByResourceType`: whether some ALLOW ACL of the session covers
    /// `operation` on a resource of the type without a DENY covering the same resource
    /// (or, with no ACLs of that type at all, `allow_if_none`).
    pub fn allows_some(
        &self,
        principal: &str,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
        allow_if_none: bool,
    ) -> bool {
        let of_type: Vec<&AclBinding> = self
            .by_id
            .values()
            .filter(|a| a.resource_type == resource_type)
            .collect();
        if of_type.is_empty() {
            return allow_if_none;
        }
        of_type.iter().any(|allow| {
            allow.permission == Permission::Allow
                && allow.decides(principal, host, operation) == Some(true)
                && !of_type.iter().any(|deny| {
                    deny.permission == Permission::Deny
                        && deny.decides(principal, host, operation) == Some(false)
                        && covers(deny, allow)
                })
        })
    }

    /// Every ACL, held ones too, with where it came from: what a snapshot must keep.
    pub fn iter_all(
        &self,
    ) -> impl Iterator<Item = (&uuid::Uuid, &AclBinding, Option<&MirroredAcl>)> {
        self.by_id
            .iter()
            .chain(self.held.iter())
            .map(|(id, acl)| (id, acl, self.mirrored.get(id)))
    }

    /// The ACLs mirror `mirror` made, held or not.
    pub fn mirrored_by<'a>(
        &'a self,
        mirror: &'a str,
    ) -> impl Iterator<Item = (&'a uuid::Uuid, &'a AclBinding, bool)> + 'a {
        self.mirrored
            .iter()
            .filter(move |(_, m)| m.mirror == mirror)
            .filter_map(|(id, m)| {
                let acl = if m.held {
                    self.held.get(id)
                } else {
                    self.by_id.get(id)
                };
                acl.map(|acl| (id, acl, m.held))
            })
    }

    /// ACL `id`, held or not, with where it came from.
    pub fn find(&self, id: &uuid::Uuid) -> Option<(&AclBinding, Option<&MirroredAcl>)> {
        self.by_id
            .get(id)
            .or_else(|| self.held.get(id))
            .map(|acl| (acl, self.mirrored.get(id)))
    }

    /// Where ACL `id` came from, if a mirror made it.
    pub fn origin(&self, id: &uuid::Uuid) -> Option<&MirroredAcl> {
        self.mirrored.get(id)
    }

    pub fn insert(&mut self, id: uuid::Uuid, acl: AclBinding) {
        self.insert_from(id, acl, None);
    }

    /// Adds (or replaces) ACL `id`; a held one is kept aside, granting nothing.
    pub fn insert_from(&mut self, id: uuid::Uuid, acl: AclBinding, origin: Option<MirroredAcl>) {
        self.remove(&id);
        if let Some(origin) = origin {
            let held = origin.held;
            self.mirrored.insert(id, origin);
            if held {
                self.held.insert(id, acl);
                self.generation = next_generation();
                return;
            }
        }
        let key = (acl.resource_type, acl.resource_name.clone());
        match acl.pattern_type {
            PatternType::Literal => self.literal.entry(key).or_default().push(id),
            PatternType::Prefixed => {
                self.prefix_lengths
                    .entry(acl.resource_type)
                    .or_default()
                    .insert(acl.resource_name.len());
                self.prefixed.entry(key).or_default().push(id);
            }
        }
        self.by_id.insert(id, acl);
        self.generation = next_generation();
    }

    pub fn remove(&mut self, id: &uuid::Uuid) -> Option<AclBinding> {
        self.mirrored.remove(id);
        if let Some(acl) = self.held.remove(id) {
            self.generation = next_generation();
            return Some(acl);
        }
        let acl = self.by_id.remove(id)?;
        let key = (acl.resource_type, acl.resource_name.clone());
        let index = match acl.pattern_type {
            PatternType::Literal => &mut self.literal,
            PatternType::Prefixed => &mut self.prefixed,
        };
        if let Some(ids) = index.get_mut(&key) {
            ids.retain(|i| i != id);
            if ids.is_empty() {
                index.remove(&key);
                if acl.pattern_type == PatternType::Prefixed {
                    let len = acl.resource_name.len();
                    let still = self
                        .prefixed
                        .keys()
                        .any(|(t, n)| *t == acl.resource_type && n.len() == len);
                    if !still {
                        if let Some(lengths) = self.prefix_lengths.get_mut(&acl.resource_type) {
                            lengths.remove(&len);
                        }
                    }
                }
            }
        }
        self.generation = next_generation();
        Some(acl)
    }

    /// The ACLs a filter matches, with their ids.
    pub fn matching<'a>(
        &'a self,
        filter: &'a AclFilter,
    ) -> impl Iterator<Item = (&'a uuid::Uuid, &'a AclBinding)> + 'a {
        self.by_id.iter().filter(|(_, acl)| filter.matches(acl))
    }

    /// The StandardAuthorizer's decision for everyone but super users (see the module
    /// docs): `allow_if_none` is `allow.everyone.if.no.acl.found`.
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
        allow_if_none: bool,
    ) -> bool {
        let mut any = false;
        let mut allowed = false;
        let mut consider = |ids: Option<&Vec<uuid::Uuid>>| -> bool {
            for acl in ids
                .into_iter()
                .flatten()
                .filter_map(|id| self.by_id.get(id))
            {
                any = true;
                match acl.decides(principal, host, operation) {
                    Some(false) => return false,
                    Some(true) => allowed = true,
                    None => {}
                }
            }
            true
        };
        let literal = |n: &str| self.literal.get(&(resource_type, n.to_owned()));
        if !consider(literal(name)) || (name != WILDCARD && !consider(literal(WILDCARD))) {
            return false;
        }
        if let Some(lengths) = self.prefix_lengths.get(&resource_type) {
            for &len in lengths.iter().take_while(|&&len| len <= name.len()) {
                let Some(prefix) = name.get(..len) else {
                    continue;
                };
                if !consider(self.prefixed.get(&(resource_type, prefix.to_owned()))) {
                    return false;
                }
            }
        }
        if any {
            allowed
        } else {
            allow_if_none
        }
    }
}

/// The authorizer's static settings (`authorizer.class.name` set).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// `super.users`: principals allowed everything.
    pub super_users: BTreeSet<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_if_none: bool,
}

/// The class names `authorizer.class.name` accepts: Kafka's KRaft and ZooKeeper-era
/// ACL authorizers, both served by [`AclSet`].
pub const AUTHORIZER_CLASSES: &[&str] = &[
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
];

impl AuthorizerConfig {
    /// `super.users` as Kafka writes it: principals separated by `;`.
    pub fn parse_super_users(value: &str) -> Result<BTreeSet<String>, InvalidAcl> {
        let mut users = BTreeSet::new();
        for p in value.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            check_principal(p)?;
            users.insert(p.to_owned());
        }
        Ok(users)
    }
}

/// What a decision is about: an operation on a resource.
type Action = (Operation, ResourceType, String);

/// How many decisions a connection remembers before it starts over.
const CACHE_CAPACITY: usize = 1024;

/// One connection's recent decisions, valid for one generation of the ACLs: a client
/// producing to the same topics asks the same questions on every request.
#[derive(Debug, Default)]
pub struct DecisionCache {
    inner: std::cell::RefCell<(u64, HashMap<Action, bool>)>,
}

impl DecisionCache {
    /// The cached decision, or `decide()`'s, remembered for `generation`.
    pub fn get_or(
        &self,
        generation: u64,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
        decide: impl FnOnce() -> bool,
    ) -> bool {
        let mut inner = self.inner.borrow_mut();
        let (cached_generation, decisions) = &mut *inner;
        if *cached_generation != generation || decisions.len() >= CACHE_CAPACITY {
            *cached_generation = generation;
            decisions.clear();
        }
        if let Some(&d) = decisions.get(&(operation, resource_type, name.to_owned())) {
            return d;
        }
        let d = decide();
        decisions.insert((operation, resource_type, name.to_owned()), d);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        rt: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        op: Operation,
        permission: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type: rt,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: principal.into(),
            host: WILDCARD.into(),
            operation: op,
            permission,
        }
    }

    fn set(acls: Vec<AclBinding>) -> AclSet {
        let mut s = AclSet::default();
        for (i, a) in acls.into_iter().enumerate() {
            s.insert(uuid::Uuid::from_u128(i as u128 + 1), a);
        }
        s
    }

    use Operation::*;
    use PatternType::*;
    use Permission::*;
    use ResourceType::*;

    #[test]
    fn no_acls_defer_to_allow_everyone_if_no_acl_found() {
        let s = set(vec![acl(Topic, "other", Literal, "User:bob", Read, Allow)]);
        assert!(!s.authorize("User:alice", "1.2.3.4", Read, Topic, "orders", false));
        assert!(s.authorize("User:alice", "1.2.3.4", Read, Topic, "orders", true));
        // An ACL on the resource for someone else means "not found" no longer applies.
        assert!(!s.authorize("User:alice", "1.2.3.4", Read, Topic, "other", true));
    }

    #[test]
    fn literal_wildcard_and_prefixed_acls_apply_and_deny_wins() {
        let s = set(vec![
            acl(Topic, "orders", Literal, "User:alice", Write, Allow),
            acl(Topic, "*", Literal, "User:bob", Read, Allow),
            acl(Topic, "pay", Prefixed, "User:carol", All, Allow),
            acl(Topic, "payroll", Prefixed, "User:carol", Delete, Deny),
            acl(Group, "g", Literal, "User:*", Read, Allow),
        ]);
        assert!(s.authorize("User:alice", "h", Write, Topic, "orders", false));
        assert!(!s.authorize("User:alice", "h", Read, Topic, "orders", false));
        assert!(s.authorize("User:bob", "h", Read, Topic, "anything", false));
        assert!(s.authorize("User:carol", "h", Delete, Topic, "payments", false));
        assert!(!s.authorize("User:carol", "h", Delete, Topic, "payroll-2026", false));
        assert!(s.authorize("User:carol", "h", Write, Topic, "payroll-2026", false));
        assert!(!s.authorize("User:carol", "h", Write, Topic, "pa", false));
        assert!(s.authorize("User:anyone", "h", Read, Group, "g", false));
        // The literal ACL on "orders" is no prefix ACL of "orders-eu".
        assert!(!s.authorize("User:alice", "h", Write, Topic, "orders-eu", false));
    }

    #[test]
    fn allows_imply_describe_but_denies_imply_nothing() {
        let s = set(vec![
            acl(Topic, "t", Literal, "User:a", Write, Allow),
            acl(Topic, "t", Literal, "User:a", AlterConfigs, Allow),
            acl(Topic, "t", Literal, "User:b", Read, Allow),
            acl(Topic, "t", Literal, "User:b", Write, Deny),
        ]);
        assert!(s.authorize("User:a", "h", Describe, Topic, "t", false));
        assert!(s.authorize("User:a", "h", DescribeConfigs, Topic, "t", false));
        assert!(!s.authorize("User:a", "h", Read, Topic, "t", false));
        assert!(s.authorize("User:b", "h", Describe, Topic, "t", false));
        assert!(!s.authorize("User:b", "h", Write, Topic, "t", false));
    }

    #[test]
    fn some_topic_allows_unless_a_deny_covers_it() {
        let mut s = set(vec![acl(Topic, "logs", Prefixed, "User:a", Write, Allow)]);
        assert!(s.allows_some("User:a", "h", Write, Topic, false));
        assert!(!s.allows_some("User:b", "h", Write, Topic, false));
        s.insert(
            uuid::Uuid::from_u128(99),
            acl(Topic, "*", Literal, "User:a", Write, Deny),
        );
        assert!(!s.allows_some("User:a", "h", Write, Topic, false));
        assert!(AclSet::default().allows_some("User:a", "h", Write, Topic, true));
    }

    #[test]
    fn hosts_must_match_unless_wildcard() {
        let mut a = acl(Topic, "t", Literal, "User:a", Read, Allow);
        a.host = "10.0.0.1".into();
        let s = set(vec![a]);
        assert!(s.authorize("User:a", "10.0.0.1", Read, Topic, "t", false));
        assert!(!s.authorize("User:a", "10.0.0.2", Read, Topic, "t", false));
    }

    #[test]
    fn removing_acls_updates_the_index() {
        let mut s = set(vec![
            acl(Topic, "pay", Prefixed, "User:c", Read, Allow),
            acl(Topic, "pax", Prefixed, "User:c", Read, Allow),
        ]);
        let g = s.generation();
        assert!(s.authorize("User:c", "h", Read, Topic, "payments", false));
        s.remove(&uuid::Uuid::from_u128(1));
        assert!(s.generation() > g);
        assert!(!s.authorize("User:c", "h", Read, Topic, "payments", false));
        assert!(s.authorize("User:c", "h", Read, Topic, "paxos", false));
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn filters_match_as_kafka_defines() {
        let lit = acl(Topic, "orders", Literal, "User:a", Read, Allow);
        let wild = acl(Topic, "*", Literal, "User:a", Read, Allow);
        let pre = acl(Topic, "ord", Prefixed, "User:a", Read, Allow);
        let f = |pattern: i8, name: Option<&str>| {
            AclFilter::from_wire(2, name, pattern, None, None, 1, 1).expect("filter")
        };
        let matching = f(MATCH_CODE, Some("orders"));
        assert!(matching.matches(&lit) && matching.matches(&wild) && matching.matches(&pre));
        let any = f(ANY_CODE, Some("orders"));
        assert!(any.matches(&lit) && !any.matches(&wild) && !any.matches(&pre));
        let prefixed = f(4, None);
        assert!(!prefixed.matches(&lit) && prefixed.matches(&pre));
        let deny_only =
            AclFilter::from_wire(1, None, 1, Some("User:a"), None, 1, 2).expect("filter");
        assert!(!deny_only.matches(&lit));
        assert!(AclFilter::from_wire(2, None, MATCH_CODE, None, None, 1, 1).is_err());
        assert!(AclFilter::from_wire(9, None, 1, None, None, 1, 1).is_err());
    }

    #[test]
    fn new_acls_are_checked_like_kafkas_controller_checks_them() {
        let ok = AclBinding::from_wire(2, "t", 3, "User:a", "*", 3, 3);
        assert!(ok.is_ok());
        for (rt, name, pt, principal, op, perm) in [
            (1, "t", 3, "User:a", 3, 3),     // ANY resource type
            (2, "t", 2, "User:a", 3, 3),     // MATCH pattern
            (2, "t", 3, "User:a", 1, 3),     // ANY operation
            (2, "t", 3, "User:a", 3, 1),     // ANY permission
            (2, "", 3, "User:a", 3, 3),      // empty name
            (2, "t", 3, "alice", 3, 3),      // no principal type
            (4, "other", 3, "User:a", 3, 3), // wrong cluster name
        ] {
            assert!(
                AclBinding::from_wire(rt, name, pt, principal, "*", op, perm).is_err(),
                "{rt} {name} {pt} {principal} {op} {perm}"
            );
        }
    }

    #[test]
    fn decision_cache_forgets_on_a_new_generation() {
        let cache = DecisionCache::default();
        assert!(cache.get_or(1, Read, Topic, "t", || true));
        assert!(cache.get_or(1, Read, Topic, "t", || panic!("cached")));
        assert!(!cache.get_or(2, Read, Topic, "t", || false));
    }

    #[test]
    fn super_users_are_separated_by_semicolons() {
        let users = AuthorizerConfig::parse_super_users("User:admin; User:broker;").expect("users");
        assert_eq!(users.len(), 2);
        assert!(users.contains("User:broker"));
        assert!(AuthorizerConfig::parse_super_users("admin").is_err());
    }
}
