//! The committed codecs are what the schemas generate: editing a schema without
//! regenerating (or editing the generated file by hand) fails here.

use std::path::Path;

#[test]
fn the_committed_mirror_codecs_match_the_schemas() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let schemas = codegen::read_schemas(&root.join(codegen::SCHEMA_DIR)).expect("schemas");
    assert!(schemas.len() >= 16, "{} schemas found", schemas.len());
    let code = codegen::generate(&schemas).expect("the schemas generate");
    let committed =
        std::fs::read_to_string(root.join(codegen::OUTPUT_FILE)).expect("generated file");
    assert!(
        committed == code,
        "{} is stale: run `cargo run -p twinlog-codegen`",
        codegen::OUTPUT_FILE
    );
}
