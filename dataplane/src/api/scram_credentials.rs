//! DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51): SCRAM
//! users as `kafka-configs --entity-type users --alter --add-config
//! 'SCRAM-SHA-512=[iterations=8192,password=...]'` manages them. The client salts the
//! password; the broker keeps only the stored and server keys derived from it, as
//! metadata records, so every broker of the cluster authenticates the user.

use std::rc::Rc;

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::ResponseError;

use super::{admin, str_bytes};
use crate::controller::{AdminRequest, AdminResult};
use crate::net::scram::{ScramCredential, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};
use crate::shard::ShardCtx;

pub fn describe(
    ctx: &Rc<ShardCtx>,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let image = ctx.metadata.load();
    let infos = |user: &str| -> Vec<CredentialInfo> {
        ScramMechanism::ALL
            .into_iter()
            .filter_map(|m| {
                let c = image.scram.get(&(user.to_owned(), m))?;
                Some(
                    CredentialInfo::default()
                        .with_mechanism(m.code())
                        .with_iterations(c.iterations),
                )
            })
            .collect()
    };
    let result =
        |user: &str| DescribeUserScramCredentialsResult::default().with_user(str_bytes(user));
    let results = match request.users.filter(|u| !u.is_empty()) {
        None => {
            let mut users: Vec<&str> = image.scram.keys().map(|(u, _)| u.as_str()).collect();
            users.dedup();
            users
                .into_iter()
                .map(|u| result(u).with_credential_infos(infos(u)))
                .collect()
        }
        Some(wanted) => {
            let names: Vec<String> = wanted.iter().map(|u| u.name.to_string()).collect();
            names
                .iter()
                .map(|user| {
                    let infos = infos(user);
                    let (code, message) = if names.iter().filter(|n| *n == user).count() > 1 {
                        (
                            ResponseError::DuplicateResource,
                            "Cannot describe SCRAM credentials for the same user twice in a single request",
                        )
                    } else if infos.is_empty() {
                        (
                            ResponseError::ResourceNotFound,
                            "Attempt to describe a user credential that does not exist",
                        )
                    } else {
                        return result(user).with_credential_infos(infos);
                    };
                    result(user)
                        .with_error_code(code.code())
                        .with_error_message(Some(str_bytes(message)))
                })
                .collect()
        }
    };
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

pub async fn alter(
    ctx: &Rc<ShardCtx>,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    // Every user named, in order; the first problem found with an item of theirs.
    let mut users: Vec<(String, Option<(ResponseError, &'static str)>)> = Vec::new();
    let mut seen: Vec<(String, i8)> = Vec::new();
    let mut note = |user: &str, mechanism: i8, problem: Option<(ResponseError, &'static str)>| {
        let problem = if seen.iter().any(|(u, m)| u == user && *m == mechanism) {
            Some((
                ResponseError::DuplicateResource,
                "A user credential cannot be altered twice in the same request",
            ))
        } else {
            problem
        };
        seen.push((user.to_owned(), mechanism));
        match users.iter_mut().find(|(u, _)| u == user) {
            Some((_, first)) => {
                if first.is_none() {
                    *first = problem;
                }
            }
            None => users.push((user.to_owned(), problem)),
        }
    };
    let unknown = (
        ResponseError::UnsupportedSaslMechanism,
        "Unknown SCRAM mechanism",
    );
    let no_name = (
        ResponseError::UnacceptableCredential,
        "Username must not be empty",
    );
    let mut deletions = Vec::new();
    for d in &request.deletions {
        let user = d.name.as_str();
        let problem = match ScramMechanism::from_code(d.mechanism) {
            _ if user.is_empty() => Some(no_name),
            None => Some(unknown),
            Some(m) => {
                deletions.push((user.to_owned(), m));
                None
            }
        };
        note(user, d.mechanism, problem);
    }
    let mut upsertions = Vec::new();
    for u in &request.upsertions {
        let user = u.name.as_str();
        let problem = match ScramMechanism::from_code(u.mechanism) {
            _ if user.is_empty() => Some(no_name),
            None => Some(unknown),
            Some(_) if u.iterations < MIN_ITERATIONS => {
                Some((ResponseError::UnacceptableCredential, "Too few iterations"))
            }
            Some(_) if u.iterations > MAX_ITERATIONS => {
                Some((ResponseError::UnacceptableCredential, "Too many iterations"))
            }
            Some(_) if u.salt.is_empty() || u.salted_password.is_empty() => Some((
                ResponseError::UnacceptableCredential,
                "Salt and salted password must not be empty",
            )),
            Some(m) => {
                upsertions.push((
                    user.to_owned(),
                    m,
                    ScramCredential::from_salted_password(
                        m,
                        &u.salt,
                        &u.salted_password,
                        u.iterations,
                    ),
                ));
                None
            }
        };
        note(user, u.mechanism, problem);
    }
    // Only users without a problem reach the controller, all their items together.
    let fine: Vec<String> = users
        .iter()
        .filter(|(_, p)| p.is_none())
        .map(|(u, _)| u.clone())
        .collect();
    deletions.retain(|(u, _)| fine.contains(u));
    upsertions.retain(|(u, _, _)| fine.contains(u));
    let mut answered = admin::submit(
        ctx,
        AdminRequest::AlterScramCredentials {
            deletions,
            upsertions,
        },
        &fine,
    )
    .await
    .into_iter();
    let results = users
        .into_iter()
        .map(|(user, problem)| {
            let r = match problem {
                Some((code, message)) => AdminResult::err(user.as_str(), code.code(), message),
                None => answered.next().unwrap_or_else(|| {
                    AdminResult::err(
                        user.as_str(),
                        ResponseError::UnknownServerError.code(),
                        "no answer",
                    )
                }),
            };
            AlterUserScramCredentialsResult::default()
                .with_user(str_bytes(user))
                .with_error_code(r.error_code)
                .with_error_message(r.message.map(str_bytes))
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}
