//! Criterion bench of the ACL check: the StandardAuthorizer decision of one action
//! against 1,000 ACLs (900 literal topic ACLs of 300 users, 90 prefixed, 10 wildcard),
//! uncached, and the per-connection cache hit every request after the first pays.
//!
//! Run: `cargo bench --bench acl` (results and machine in perf/RESULTS.md).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use dataplane::acl::{
    AclBinding, AclSet, DecisionCache, Operation, PatternType, Permission, ResourceType,
};

fn acls() -> AclSet {
    let mut set = AclSet::default();
    let mut id = 0u128;
    let mut add = |name: String, pattern: PatternType, principal: String, op: Operation| {
        id += 1;
        set.insert(
            uuid::Uuid::from_u128(id),
            AclBinding {
                resource_type: ResourceType::Topic,
                resource_name: name,
                pattern_type: pattern,
                principal,
                host: "*".into(),
                operation: op,
                permission: Permission::Allow,
            },
        );
    };
    for i in 0..900 {
        add(
            format!("orders-{i}"),
            PatternType::Literal,
            format!("User:u{}", i % 300),
            Operation::Write,
        );
    }
    for i in 0..90 {
        add(
            format!("team{i}-"),
            PatternType::Prefixed,
            format!("User:u{i}"),
            Operation::Read,
        );
    }
    for i in 0..10 {
        add(
            "*".into(),
            PatternType::Literal,
            format!("User:admin{i}"),
            Operation::Describe,
        );
    }
    set
}

fn bench(c: &mut Criterion) {
    let set = acls();
    c.bench_function("acl authorize (1,000 ACLs, uncached)", |b| {
        b.iter(|| {
            black_box(set.authorize(
                black_box("User:u7"),
                "10.0.0.7",
                Operation::Write,
                ResourceType::Topic,
                black_box("orders-307"),
                false,
            ))
        })
    });
    let cache = DecisionCache::default();
    c.bench_function("acl authorize (per-connection cache hit)", |b| {
        b.iter(|| {
            black_box(cache.get_or(
                set.generation(),
                Operation::Write,
                ResourceType::Topic,
                black_box("orders-307"),
                || {
                    set.authorize(
                        "User:u7",
                        "10.0.0.7",
                        Operation::Write,
                        ResourceType::Topic,
                        "orders-307",
                        false,
                    )
                },
            ))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
