//! The registry's errors, with Confluent's HTTP statuses, error codes and messages
//! (`{"error_code":40401,"message":"Subject 'x' not found."}`). Pure.

/// A refused request: the HTTP status and the body's `error_code` and `message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub status: u16,
    pub code: u32,
    pub message: String,
}

fn e(status: u16, code: u32, message: String) -> Error {
    Error {
        status,
        code,
        message,
    }
}

impl Error {
    pub fn subject_not_found(subject: &str) -> Error {
        e(404, 40401, format!("Subject '{subject}' not found."))
    }

    pub fn version_not_found(version: i32) -> Error {
        e(404, 40402, format!("Version {version} not found."))
    }

    pub fn schema_not_found(id: Option<i32>) -> Error {
        match id {
            Some(id) => e(404, 40403, format!("Schema {id} not found")),
            None => e(404, 40403, "Schema not found".into()),
        }
    }

    pub fn subject_soft_deleted(subject: &str) -> Error {
        e(
            404,
            40404,
            format!(
                "Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
            ),
        )
    }

    pub fn subject_not_soft_deleted(subject: &str) -> Error {
        e(
            404,
            40405,
            format!("Subject '{subject}' was not deleted first before being permanently deleted"),
        )
    }

    pub fn version_soft_deleted(subject: &str, version: i32) -> Error {
        e(
            404,
            40406,
            format!(
                "Subject '{subject}' Version {version} was soft deleted.Set permanent=true to \
                 delete permanently"
            ),
        )
    }

    pub fn version_not_soft_deleted(subject: &str, version: i32) -> Error {
        e(
            404,
            40407,
            format!(
                "Subject '{subject}' Version {version} was not deleted first before being \
                 permanently deleted"
            ),
        )
    }

    pub fn no_subject_level(subject: &str) -> Error {
        e(
            404,
            40408,
            format!("Subject '{subject}' does not have subject-level compatibility configured"),
        )
    }

    pub fn no_subject_mode(subject: &str) -> Error {
        e(
            404,
            40409,
            format!("Subject '{subject}' does not have subject-level mode configured"),
        )
    }

    pub fn incompatible(subject: &str, details: &[String], level: &str) -> Error {
        let mut d = details.to_vec();
        d.push(format!("{{compatibility: '{level}'}}"));
        e(
            409,
            409,
            format!(
                "Schema being registered is incompatible with an earlier schema for subject \
                 \"{subject}\", details: [{}]",
                d.join(", ")
            ),
        )
    }

    pub fn invalid_schema(why: &str) -> Error {
        e(422, 42201, format!("Invalid schema: {why}"))
    }

    pub fn invalid_version(given: &str) -> Error {
        e(
            422,
            42202,
            format!(
                "The specified version '{given}' is not a valid version id. Allowed values are \
                 between [1, 2^31-1] and the string \"latest\""
            ),
        )
    }

    pub fn invalid_level() -> Error {
        e(
            422,
            42203,
            "Invalid compatibility level. Valid values are none, backward, forward, full, \
             backward_transitive, forward_transitive, and full_transitive"
                .into(),
        )
    }

    pub fn invalid_mode() -> Error {
        e(
            422,
            42204,
            "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT".into(),
        )
    }

    pub fn not_permitted(message: String) -> Error {
        e(422, 42205, message)
    }

    pub fn read_only(subject: &str) -> Error {
        Error::not_permitted(format!("Subject {subject} is in read-only mode"))
    }

    pub fn reference_exists(subject: &str, version: i32) -> Error {
        e(
            422,
            42206,
            format!(
                "One or more references exist to the schema \
                 {{magic=1,keytype=SCHEMA,subject={subject},version={version}}}."
            ),
        )
    }

    pub fn id_taken(id: i32) -> Error {
        e(
            422,
            42207,
            format!("Overwrite new schema with id {id} is not permitted."),
        )
    }

    /// A request body that is not the JSON expected (Confluent answers such bodies 400 or
    /// 422 depending on where its parser stops; never a 500).
    pub fn bad_request(why: String) -> Error {
        e(400, 400, why)
    }

    pub fn unprocessable(why: String) -> Error {
        e(422, 422, why)
    }

    pub fn store(why: String) -> Error {
        e(
            500,
            50001,
            format!("Error while writing to the Kafka store: {why}"),
        )
    }

    pub fn timeout(why: String) -> Error {
        e(500, 50002, why)
    }

    /// The writer is not known (`_schemas` partition 0 has no leader, or its leader no HTTP
    /// listener to forward to), as Confluent's follower answers when it knows no leader.
    pub fn unknown_leader(why: String) -> Error {
        e(
            500,
            50004,
            format!("Request failed since the leader is unknown: {why}"),
        )
    }

    /// The write could not be forwarded to the writer, as Confluent's follower answers when
    /// its request to the leader fails.
    pub fn forwarding(why: String) -> Error {
        e(
            500,
            50003,
            format!("Error while forwarding the request to the leader: {why}"),
        )
    }

    pub fn not_leader() -> Error {
        e(
            500,
            50004,
            "This broker does not lead _schemas partition 0, where registry writes go: send \
             writes to the broker that leads it"
                .into(),
        )
    }
}
