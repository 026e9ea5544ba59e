//! ACL sync, step 7 of a mirror's metadata sync (reference §8.5; issue 19): the source's
//! ACLs on the mirror's topics and synced groups, filtered by the mirror's
//! `acls.include` rules, are made here too, and taken away here when the source drops
//! them.
//!
//! Where Twinlog differs from the reference's sketch (its edge case 20):
//! - Only ACLs the mirror made are ever changed or deleted. Each carries its mirror
//!   ([`MirroredAcl`] in its metadata record), so operators' own ACLs, other mirrors'
//!   and those on resources the mirror does not cover are left alone.
//! - The scope is the mirror's MIRRORING topics (a TOPIC pattern naming at least one)
//!   and the groups whose offsets it syncs (a literal group name the group filter
//!   accepts; prefixed and `*` group patterns always). Other resource types (CLUSTER,
//!   TRANSACTIONAL_ID, ...) belong to each cluster and are not synced. An ACL of a
//!   paused or failed-over topic is out of scope: it stays as it is, so after failover
//!   the destination keeps the access the source gave.
//! - An ACL that would let someone write to a topic that is still a read-only mirror (an
//!   ALLOW of WRITE or ALL naming it) is made *held*: it is in the metadata but grants
//!   nothing and DescribeAcls does not list it. Failing the topic over releases it in
//!   the same metadata batch, so the producers the source allowed can write at once.
//! - A source without an authorizer answers SECURITY_DISABLED: nothing to sync.

use std::collections::BTreeMap;

use dataplane::acl::{
    allows_write_to, names, AclBinding, MirrorAclChange, Operation, PatternType, Permission,
    ResourceType, WILDCARD,
};
use dataplane::client::KafkaConnection;
use kafka_protocol::messages::{ApiKey, DescribeAclsRequest};
use kafka_protocol::ResponseError;

use super::sync::GroupFilter;

/// Kafka's ANY code for the resource type, pattern type, operation and permission of an
/// ACL filter.
const ANY: i8 = 1;

/// One `acls.include` rule: `resourceType;resourceNameRegex;operation;permissionType;
/// principalRegex`, each field `*` (or left off at the end) for any.
#[derive(Debug, Clone)]
struct AclRule {
    resource_type: Option<ResourceType>,
    resource_name: Option<regex::Regex>,
    operation: Option<Operation>,
    permission: Option<Permission>,
    principal: Option<regex::Regex>,
}

/// A mirror's `acls.include`: an ACL is synced when some rule matches it. Default `*`
/// (every ACL in scope); an empty value syncs none.
#[derive(Debug, Clone)]
pub struct AclRules {
    rules: Vec<AclRule>,
}

impl AclRules {
    pub fn from_configs(configs: &BTreeMap<String, String>) -> Result<Self, String> {
        AclRules::parse(configs.get("acls.include").map_or("*", String::as_str))
            .map_err(|e| format!("mirror config acls.include: {e}"))
    }

    pub fn parse(value: &str) -> Result<Self, String> {
        let mut rules = Vec::new();
        for rule in value.split(',').map(str::trim).filter(|r| !r.is_empty()) {
            let fields: Vec<&str> = rule.split(';').map(str::trim).collect();
            if fields.len() > 5 {
                return Err(format!(
                    "rule {rule:?} has {} fields; expected at most 5: resourceType;resourceNameRegex;operation;permissionType;principalRegex",
                    fields.len()
                ));
            }
            let field = |i: usize| {
                fields
                    .get(i)
                    .copied()
                    .filter(|f| *f != WILDCARD && !f.is_empty())
            };
            let regex = |i: usize| {
                field(i)
                    .map(|p| {
                        regex::Regex::new(&format!("^(?:{p})$"))
                            .map_err(|e| format!("rule {rule:?}: invalid regex {p:?}: {e}"))
                    })
                    .transpose()
            };
            fn label<T: Copy>(
                all: &[T],
                name: &str,
                label: impl Fn(T) -> &'static str,
            ) -> Option<T> {
                all.iter()
                    .copied()
                    .find(|v| label(*v).eq_ignore_ascii_case(name))
            }
            let resource_type = field(0)
                .map(|n| {
                    label(ResourceType::ALL, n, ResourceType::label)
                        .ok_or_else(|| format!("rule {rule:?}: unknown resource type {n:?}"))
                })
                .transpose()?;
            let operation = field(2)
                .map(|n| {
                    label(Operation::ALL, n, Operation::label)
                        .ok_or_else(|| format!("rule {rule:?}: unknown operation {n:?}"))
                })
                .transpose()?;
            let permission = field(3)
                .map(|n| {
                    label(Permission::ALL, n, Permission::label)
                        .ok_or_else(|| format!("rule {rule:?}: unknown permission type {n:?}"))
                })
                .transpose()?;
            rules.push(AclRule {
                resource_type,
                resource_name: regex(1)?,
                operation,
                permission,
                principal: regex(4)?,
            });
        }
        Ok(AclRules { rules })
    }

    pub fn matches(&self, acl: &AclBinding) -> bool {
        self.rules.iter().any(|r| {
            r.resource_type.is_none_or(|t| t == acl.resource_type)
                && r.resource_name
                    .as_ref()
                    .is_none_or(|re| re.is_match(&acl.resource_name))
                && r.operation.is_none_or(|o| o == acl.operation)
                && r.permission.is_none_or(|p| p == acl.permission)
                && r.principal
                    .as_ref()
                    .is_none_or(|re| re.is_match(&acl.principal))
        })
    }
}

/// What one mirror's ACL sync may touch: its MIRRORING topics and synced groups.
#[derive(Debug)]
pub struct AclScope<'a> {
    /// The mirror's MIRRORING topics.
    pub topics: &'a [&'a str],
    /// The mirror's read-only topics (MIRRORING or PAUSED).
    pub read_only: &'a [&'a str],
    pub groups: &'a GroupFilter,
}

impl AclScope<'_> {
    fn covers(&self, acl: &AclBinding) -> bool {
        match acl.resource_type {
            ResourceType::Topic => self.topics.iter().any(|t| names(acl, t)),
            ResourceType::Group => {
                acl.pattern_type == PatternType::Prefixed
                    || acl.resource_name == WILDCARD
                    || self.groups.matches(&acl.resource_name)
            }
            _ => false,
        }
    }

    fn must_hold(&self, acl: &AclBinding) -> bool {
        self.read_only.iter().any(|t| allows_write_to(acl, t))
    }
}

/// The changes that make this cluster's mirrored ACLs those of `source` in `scope`:
/// create what is missing (held when it must be), hold or release what changed, delete
/// the mirror's ACLs the source no longer has. `exists` says whether an equal ACL is
/// here already (an operator's counts: it is not made twice). `owned` are the ACLs this
/// mirror made, with their held flags.
pub fn plan_acl_sync(
    source: &[AclBinding],
    rules: &AclRules,
    scope: &AclScope<'_>,
    owned: &[(uuid::Uuid, AclBinding, bool)],
    exists: impl Fn(&AclBinding) -> bool,
) -> Vec<MirrorAclChange> {
    let wanted: Vec<&AclBinding> = source
        .iter()
        .filter(|acl| rules.matches(acl) && scope.covers(acl))
        .collect();
    let mut changes = Vec::new();
    for acl in &wanted {
        let held = scope.must_hold(acl);
        match owned.iter().find(|(_, b, _)| b == *acl) {
            Some((id, _, was)) if *was != held => {
                changes.push(MirrorAclChange::SetHeld { id: *id, held })
            }
            Some(_) => {}
            None if exists(acl) => {}
            None => changes.push(MirrorAclChange::Create {
                acl: (*acl).clone(),
                held,
            }),
        }
    }
    for (id, acl, _) in owned {
        if scope.covers(acl) && !wanted.contains(&acl) {
            changes.push(MirrorAclChange::Delete { id: *id });
        }
    }
    changes
}

/// Every ACL of the source (DescribeAcls with an all-ANY filter); `None` when the
/// source has no authorizer (SECURITY_DISABLED) or does not serve DescribeAcls.
pub async fn source_acls(conn: &mut KafkaConnection) -> Result<Option<Vec<AclBinding>>, String> {
    // A source that does not serve DescribeAcls (a Kafka-compatible broker without
    // ACLs) has none to sync, like one without an authorizer.
    let Some(v) = conn.pick_version(ApiKey::DescribeAcls as i16, 1, 3) else {
        return Ok(None);
    };
    let request = DescribeAclsRequest::default()
        .with_resource_type_filter(ANY)
        .with_pattern_type_filter(ANY)
        .with_operation(ANY)
        .with_permission_type(ANY)
        // The defaults are empty strings, which filter for empty names.
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None);
    let resp = conn
        .send(&request, v)
        .await
        .map_err(|e| format!("DescribeAcls: {e}"))?;
    if resp.error_code == ResponseError::SecurityDisabled.code() {
        return Ok(None);
    }
    if resp.error_code != 0 {
        let name = ResponseError::try_from_code(resp.error_code).map_or_else(
            || format!("error {}", resp.error_code),
            |e| format!("{e:?}"),
        );
        return Err(format!(
            "DescribeAcls: {name} {}",
            resp.error_message.as_deref().unwrap_or("")
        ));
    }
    let mut acls = Vec::new();
    for resource in &resp.resources {
        for entry in &resource.acls {
            // An ACL this broker cannot hold (a resource type it does not know) is not
            // synced rather than failing the step.
            if let Ok(acl) = AclBinding::from_wire(
                resource.resource_type,
                &resource.resource_name,
                resource.pattern_type,
                &entry.principal,
                &entry.host,
                entry.operation,
                entry.permission_type,
            ) {
                acls.push(acl);
            }
        }
    }
    Ok(Some(acls))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(t: ResourceType, name: &str, p: PatternType, who: &str, op: Operation) -> AclBinding {
        AclBinding {
            resource_type: t,
            resource_name: name.into(),
            pattern_type: p,
            principal: who.into(),
            host: "*".into(),
            operation: op,
            permission: Permission::Allow,
        }
    }

    fn groups(include: &str) -> GroupFilter {
        GroupFilter::from_configs(&BTreeMap::from([(
            "groups.include".to_string(),
            include.to_string(),
        )]))
        .expect("valid")
    }

    fn rules(text: &str) -> AclRules {
        AclRules::parse(text).expect("valid rules")
    }

    #[test]
    fn rules_match_field_by_field_with_wildcards_and_omitted_tails() {
        let read = acl(
            ResourceType::Topic,
            "orders",
            PatternType::Literal,
            "User:app",
            Operation::Read,
        );
        assert!(rules("*").matches(&read));
        assert!(rules("topic;ord.*").matches(&read));
        assert!(!rules("GROUP").matches(&read));
        assert!(rules("TOPIC;*;READ;ALLOW;User:a.*").matches(&read));
        assert!(!rules("TOPIC;*;WRITE").matches(&read));
        assert!(!rules("*;*;*;DENY").matches(&read));
        assert!(!rules("").matches(&read));
        assert!(rules("GROUP, TOPIC;orders").matches(&read));
        for bad in [
            "BOGUS",
            "TOPIC;(",
            "TOPIC;*;FLY",
            "TOPIC;*;READ;MAYBE",
            "a;b;c;d;e;f",
        ] {
            assert!(AclRules::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sync_creates_holds_releases_and_deletes_only_its_own() {
        let read = acl(
            ResourceType::Topic,
            "orders",
            PatternType::Literal,
            "User:app",
            Operation::Read,
        );
        let write = acl(
            ResourceType::Topic,
            "ord",
            PatternType::Prefixed,
            "User:app",
            Operation::Write,
        );
        let other = acl(
            ResourceType::Topic,
            "billing",
            PatternType::Literal,
            "User:app",
            Operation::Read,
        );
        let group = acl(
            ResourceType::Group,
            "app-1",
            PatternType::Literal,
            "User:app",
            Operation::Read,
        );
        let foreign_group = acl(
            ResourceType::Group,
            "ops",
            PatternType::Literal,
            "User:app",
            Operation::Read,
        );
        let cluster = acl(
            ResourceType::Cluster,
            "kafka-cluster",
            PatternType::Literal,
            "User:app",
            Operation::Alter,
        );
        let source = vec![
            read.clone(),
            write.clone(),
            other.clone(),
            group.clone(),
            foreign_group,
            cluster,
        ];
        let all = rules("*");
        let g = groups("app-.*");
        let scope = AclScope {
            topics: &["orders"],
            read_only: &["orders"],
            groups: &g,
        };

        let changes = plan_acl_sync(&source, &all, &scope, &[], |_| false);
        assert_eq!(
            changes,
            vec![
                MirrorAclChange::Create {
                    acl: read.clone(),
                    held: false
                },
                MirrorAclChange::Create {
                    acl: write.clone(),
                    held: true
                },
                MirrorAclChange::Create {
                    acl: group.clone(),
                    held: false
                },
            ]
        );
        // One the operator made already is not made again.
        let changes = plan_acl_sync(&source, &all, &scope, &[], |a| *a == read);
        assert_eq!(changes.len(), 2);

        // Once made: nothing to do; after failover the WRITE is released.
        let (r, w, gr) = (
            uuid::Uuid::from_u128(1),
            uuid::Uuid::from_u128(2),
            uuid::Uuid::from_u128(3),
        );
        let owned = vec![
            (r, read.clone(), false),
            (w, write.clone(), true),
            (gr, group.clone(), false),
        ];
        assert!(plan_acl_sync(&source, &all, &scope, &owned, |_| true).is_empty());
        let writable = AclScope {
            topics: &["orders"],
            read_only: &[],
            groups: &g,
        };
        assert_eq!(
            plan_acl_sync(&source, &all, &writable, &owned, |_| true),
            vec![MirrorAclChange::SetHeld { id: w, held: false }]
        );

        // The source drops READ and the group ACL: both go; a failed-over topic's stay.
        let fewer = vec![write.clone()];
        assert_eq!(
            plan_acl_sync(&fewer, &all, &scope, &owned, |_| true),
            vec![
                MirrorAclChange::Delete { id: r },
                MirrorAclChange::Delete { id: gr }
            ]
        );
        let none_mirroring = AclScope {
            topics: &[],
            read_only: &[],
            groups: &g,
        };
        let changes = plan_acl_sync(&fewer, &all, &none_mirroring, &owned, |_| true);
        assert_eq!(changes, vec![MirrorAclChange::Delete { id: gr }]);

        // Rules narrow what is synced, and what the mirror deletes.
        let only_reads = rules("TOPIC;*;READ");
        assert_eq!(
            plan_acl_sync(&source, &only_reads, &scope, &[], |_| false),
            vec![MirrorAclChange::Create {
                acl: read,
                held: false
            }]
        );
    }
}
