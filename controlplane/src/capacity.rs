//! Whether this node can open the partitions a CreateTopics or CreatePartitions would
//! place on it: each replica holds an open `.log` file from its creation (two with
//! `log.direct.io`), so a request that would run the process out of descriptors is
//! refused before anything is created, topic by topic in request order, with
//! POLICY_VIOLATION and a message that says how many files are left. Without this a
//! node ran out part-way and left topics half-created (partitions that failed with
//! KAFKA_STORAGE_ERROR "Too many open files").
//!
//! The budget is this process's: the soft `RLIMIT_NOFILE` (raised to the hard limit at
//! start), minus the descriptors open now, minus [`reserve`] kept for connections,
//! segment rolls and the cleaner. It is checked for the replicas placed on the node
//! that plans the request; another node of a cluster is not asked (ARCHITECTURE.md).

use std::collections::{BTreeMap, BTreeSet};

use dataplane::controller::{AdminResponse, AdminResult};
use kafka_protocol::ResponseError;

use crate::metadata_log::MetadataRecord;
use crate::state::Plan;

/// This process's open-file budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileBudget {
    /// The soft limit of open files.
    pub limit: u64,
    /// Descriptors open now.
    pub open: u64,
}

impl FileBudget {
    /// Read from `/proc/self` (`None` where it cannot be: the check is then skipped).
    pub fn of_this_process() -> Option<FileBudget> {
        let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
        let limit = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))?
            .split_whitespace()
            .nth(3)?
            .parse()
            .ok()?;
        let open = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        Some(FileBudget { limit, open })
    }

    /// Files that new partitions may still take.
    pub fn free(&self) -> u64 {
        self.limit.saturating_sub(self.open + reserve(self.limit))
    }
}

/// Descriptors kept back from new partitions: a tenth of the limit, at most 1,024.
pub fn reserve(limit: u64) -> u64 {
    (limit / 10).min(1024)
}

/// Takes out of `plan` the topics whose partitions on `node` would need more than
/// `budget` allows at `files_per_partition` each (counted in request order: the first
/// topics that fit are created), answering each with POLICY_VIOLATION. `existing` finds
/// the id of a topic that already exists (CreatePartitions).
pub fn enforce(
    plan: &mut Plan,
    node: i32,
    files_per_partition: u64,
    budget: FileBudget,
    existing: &dyn Fn(&str) -> Option<uuid::Uuid>,
) {
    let AdminResponse::Results(results) = &mut plan.response else {
        return;
    };
    let mut ids: BTreeMap<String, uuid::Uuid> = BTreeMap::new();
    let mut here: BTreeMap<uuid::Uuid, u64> = BTreeMap::new();
    for record in &plan.records {
        match record {
            MetadataRecord::Topic { name, id } => {
                ids.insert(name.clone(), *id);
            }
            MetadataRecord::Partition(p) if p.replicas.contains(&node) => {
                *here.entry(p.topic_id).or_default() += 1;
            }
            _ => {}
        }
    }
    let free = budget.free();
    let mut taken = 0u64;
    let mut refused_ids = BTreeSet::new();
    let mut refused_names = BTreeSet::new();
    for result in results.iter_mut().filter(|r| r.error_code == 0) {
        let Some(id) = ids
            .get(&result.name)
            .copied()
            .or_else(|| existing(&result.name))
        else {
            continue;
        };
        let partitions = here.get(&id).copied().unwrap_or(0);
        let files = partitions * files_per_partition;
        if taken + files <= free {
            taken += files;
            continue;
        }
        *result = AdminResult::err(
            result.name.clone(),
            ResponseError::PolicyViolation.code(),
            format!(
                "node {node} cannot open {partitions} more partition(s) of {}: they need {files} open files and {} are left (open file limit {}, {} open, {} kept for connections); raise the limit (ulimit -n, systemd LimitNOFILE) or create fewer partitions",
                result.name,
                free.saturating_sub(taken),
                budget.limit,
                budget.open,
                reserve(budget.limit)
            ),
        );
        refused_ids.insert(id);
        refused_names.insert(result.name.clone());
    }
    if refused_ids.is_empty() {
        return;
    }
    plan.records.retain(|r| match r {
        MetadataRecord::Topic { id, .. } => !refused_ids.contains(id),
        MetadataRecord::Partition(p) => !refused_ids.contains(&p.topic_id),
        MetadataRecord::Config { resource_name, .. } => !refused_names.contains(resource_name),
        _ => true,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::new_partition;

    fn topic_plan(topics: &[(&str, u128, i32)]) -> Plan {
        let mut records = Vec::new();
        let mut results = Vec::new();
        for (name, id, partitions) in topics {
            let id = uuid::Uuid::from_u128(*id);
            records.push(MetadataRecord::Topic {
                name: (*name).to_owned(),
                id,
            });
            for p in 0..*partitions {
                // Alternating between nodes 1 and 2: half of them on node 1.
                records.push(MetadataRecord::Partition(new_partition(
                    id,
                    p,
                    vec![1 + p % 2],
                )));
            }
            records.push(MetadataRecord::Config {
                resource_type: crate::ConfigResourceType::Topic,
                resource_name: (*name).to_owned(),
                name: "retention.ms".into(),
                value: Some("1".into()),
            });
            results.push(AdminResult::ok(*name));
        }
        Plan {
            records,
            response: AdminResponse::Results(results),
        }
    }

    #[test]
    fn topics_past_the_budget_are_refused_whole_and_the_rest_created() {
        // 2,000 files, 200 open, 200 kept: 1,600 free.
        let budget = FileBudget {
            limit: 2000,
            open: 200,
        };
        assert_eq!(budget.free(), 1600);
        // On node 1: a has 500, b 1,200 (too many after a), c 100.
        let mut plan = topic_plan(&[("a", 1, 1000), ("b", 2, 2400), ("c", 3, 200)]);
        enforce(&mut plan, 1, 1, budget, &|_| None);
        let AdminResponse::Results(results) = &plan.response else {
            panic!("results")
        };
        let codes: Vec<i16> = results.iter().map(|r| r.error_code).collect();
        assert_eq!(codes, [0, ResponseError::PolicyViolation.code(), 0]);
        let message = results[1].message.as_deref().unwrap_or_default();
        assert!(
            message.contains("1200 open files and 1100 are left"),
            "{message}"
        );
        // Nothing of b stays in the plan: not its topic, partitions or configs.
        let b = uuid::Uuid::from_u128(2);
        assert!(plan.records.iter().all(|r| match r {
            MetadataRecord::Topic { id, .. } => *id != b,
            MetadataRecord::Partition(p) => p.topic_id != b,
            MetadataRecord::Config { resource_name, .. } => resource_name != "b",
            _ => true,
        }));
        assert_eq!(plan.records.len(), 1 + 1000 + 1 + 1 + 200 + 1);
        // With log.direct.io each takes two: a alone fits no more.
        let mut plan = topic_plan(&[("a", 1, 1000), ("c", 3, 2000)]);
        enforce(&mut plan, 1, 2, budget, &|_| None);
        let AdminResponse::Results(results) = &plan.response else {
            panic!("results")
        };
        assert_eq!(results[0].error_code, 0);
        assert_eq!(results[1].error_code, ResponseError::PolicyViolation.code());
        // Another node's partitions cost this one nothing.
        let mut plan = topic_plan(&[("a", 1, 1000)]);
        enforce(
            &mut plan,
            3,
            1,
            FileBudget {
                limit: 100,
                open: 99,
            },
            &|_| None,
        );
        let AdminResponse::Results(results) = &plan.response else {
            panic!("results")
        };
        assert_eq!(results[0].error_code, 0);
    }

    #[test]
    fn new_partitions_of_an_existing_topic_count_too() {
        let id = uuid::Uuid::from_u128(9);
        let mut plan = Plan {
            records: (10..20)
                .map(|p| MetadataRecord::Partition(new_partition(id, p, vec![1])))
                .collect(),
            response: AdminResponse::Results(vec![AdminResult::ok("t")]),
        };
        let budget = FileBudget {
            limit: 100,
            open: 85,
        };
        enforce(&mut plan, 1, 1, budget, &|name| (name == "t").then_some(id));
        let AdminResponse::Results(results) = &plan.response else {
            panic!("results")
        };
        assert_eq!(results[0].error_code, ResponseError::PolicyViolation.code());
        assert!(plan.records.is_empty());
    }
}
