use super::*;

fn parse(text: &str) -> Result<Vec<Manifest>, LoadError> {
    parse_file(
        Source::ReleaseManifests,
        "f.yaml",
        "release-manifests/f.yaml",
        text,
        ObjectDetail::Whole,
    )
}

#[test]
fn yaml_1_1_octal_and_booleans_read_like_kubectl() {
    let m = parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {}\nmode: 0644\nflag: on\nver: 4.10\n").unwrap();
    assert_eq!(m[0].object["mode"], serde_json::json!(420));
    assert_eq!(m[0].object["flag"], serde_json::json!(true));
    assert_eq!(m[0].object["ver"], serde_json::json!(4.1));
}

#[test]
fn empty_and_null_documents_are_skipped() {
    let text = "# header\n---\n---\nnull\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n\n";
    let m = parse(text).unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].document, 0);
    assert_eq!(m[0].line, 6);
}

#[test]
fn json_stream_is_read() {
    let text = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}\n{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"b\"}}";
    let m = parse(text).unwrap();
    assert_eq!(m.len(), 2);
    assert_eq!(m[1].line, 2);
    assert_eq!(m[1].id.name, "b");
}

#[test]
fn malformed_yaml_names_document_and_line() {
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: [unclosed\n";
    let e = parse(text).unwrap_err();
    let LoadError::Syntax { document, line, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(*document, 1);
    assert!(*line >= 6, "{e}");
    assert!(
        e.to_string()
            .starts_with("release-manifests/f.yaml: document 1 (line "),
        "{e}"
    );
}

#[test]
fn missing_kind_is_rejected_with_exact_text() {
    let e = parse("apiVersion: v1\nmetadata:\n  name: a\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "release-manifests/f.yaml: document 0 (line 1): object has no kind: must contain kubernetes required fields apiVersion, kind and metadata.name"
    );
}

#[test]
fn missing_name_is_rejected_with_exact_text() {
    let e = parse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: x\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "release-manifests/f.yaml: document 0 (line 1): object has no metadata.name: must contain kubernetes required fields apiVersion, kind and metadata.name"
    );
}

#[test]
fn duplicate_object_in_one_file_is_rejected_with_exact_text() {
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns1}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns1}\n";
    let e = parse(text).unwrap_err();
    assert_eq!(
        e.to_string(),
        "release-manifests/f.yaml: document 1 (line 5): duplicate object ConfigMap ns1/a, first defined in document 0 (line 1)"
    );
}

#[test]
fn duplicate_mapping_key_keeps_the_last_value_as_the_cvo_does() {
    let ms = parse("apiVersion: v1\nkind: ConfigMap\nkind: Secret\nmetadata: {name: a}\ndata:\n  k: 1\n  k: 2\n")
        .expect("the CVO loads a repeated key");
    assert_eq!(ms.len(), 1);
    assert_eq!(ms[0].id.kind, "Secret");
    assert_eq!(ms[0].object["data"]["k"], serde_json::json!(2));
}

#[test]
fn repeated_mapping_is_replaced_not_merged() {
    let ms = parse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: {x: \"1\"}\nmetadata:\n  name: b\n")
        .expect("loads");
    assert_eq!(ms[0].id.name, "b");
    assert!(ms[0].object["metadata"].get("labels").is_none());
}

#[test]
fn scalar_document_is_rejected() {
    let e = parse("just a string\n").unwrap_err();
    assert!(e.to_string().contains("found a string"), "{e}");
}

#[test]
fn non_string_annotation_loads_and_the_filter_reads_no_annotations_as_the_cvo_does() {
    let ms = parse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n    release.openshift.io/delete: true\n").expect("the CVO loads it");
    let verdict = crate::Filters::default().include_at_load(&ms[0], None);
    assert_eq!(
        verdict,
        Err(
            "no annotations (the value of \"release.openshift.io/delete\" is not a string)"
                .to_string()
        )
    );
}

#[test]
fn null_document_does_not_shift_the_document_index() {
    let text = "---\nnull\n---\n# only a comment\n---\napiVersion: v1\nkind: [x\n";
    let e = parse(text).unwrap_err();
    assert!(
        matches!(
            e,
            LoadError::Syntax {
                document: 0,
                line: 7,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn error_on_a_separator_names_the_document_it_starts() {
    assert_eq!(document_at_line("a: 1\n---\nb: 2\n", 2), 1);
    assert_eq!(document_at_line("---\n---\nb: 2\n", 2), 0);
}

#[test]
fn alias_bomb_is_stopped_and_named() {
    let mut text = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n");
    text.push_str("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for (prev, cur) in "abcdefghi".chars().zip("bcdefghij".chars()) {
        let refs = vec![format!("*{prev}"); 10].join(", ");
        text.push_str(&format!("{cur}: &{cur} [{refs}]\n"));
    }
    let e = parse(&text).unwrap_err().to_string();
    assert!(e.contains("aliases expand to too much data"), "{e}");
    assert!(e.contains("hint: YAML aliases"), "{e}");
}

#[test]
fn object_larger_than_the_apiserver_accepts_is_rejected() {
    let big = "a".repeat(MAX_OBJECT_BYTES);
    let e = parse(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata: {{x: {big}}}\n"
    ))
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "release-manifests/f.yaml: document 0 (line 1): object is larger than 3 MiB as JSON, more than the kube-apiserver accepts in one request"
    );
    let fits = "a".repeat(MAX_OBJECT_BYTES - 200);
    parse(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata: {{x: {fits}}}\n"
    ))
    .unwrap();
}

#[test]
fn non_string_label_loads_and_is_left_to_the_api_server() {
    let ms = parse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: {tier: 1}\n")
        .expect("the CVO loads it");
    assert_eq!(
        ms[0].object["metadata"]["labels"]["tier"],
        serde_json::json!(1)
    );
}

#[test]
fn deep_json_is_named_for_people() {
    let deep = format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(200));
    let e = parse(&deep).unwrap_err().to_string();
    assert!(
        e.ends_with("invalid JSON: nested too deeply (at most 128 levels) (column 132)"),
        "{e}"
    );
}
