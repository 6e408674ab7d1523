//! Properties of `Redactor::redact` on arbitrary input: it never panics, redacting
//! twice gives what redacting once gave, and known values never survive.

use proptest::prelude::*;
use reprise_redact::{MASK, Redactor};

/// Fragments that steer random text toward the patterns' edges: prefixes, key
/// names, separators, quotes, masks and PEM markers, mixed with arbitrary text.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-zA-Z0-9_+/=.-]{0,60}",
        Just("password=".to_owned()),
        Just("\"api_key\": \"".to_owned()),
        Just("token: ".to_owned()),
        Just("Authorization: Bearer ".to_owned()),
        Just("postgres://user:".to_owned()),
        Just("@host/db".to_owned()),
        Just("ghp_".to_owned()),
        Just("sk-proj-".to_owned()),
        Just("AKIA".to_owned()),
        Just("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.".to_owned()),
        Just("-----BEGIN RSA PRIVATE KEY-----\n".to_owned()),
        Just("-----END RSA PRIVATE KEY-----".to_owned()),
        Just(MASK.to_owned()),
        Just("REDACTED]".to_owned()),
        Just(" -u admin -p ".to_owned()),
        Just("'".to_owned()),
        Just("\"".to_owned()),
        Just("\\\"".to_owned()),
        Just("\n".to_owned()),
        Just("é日本".to_owned()),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(), 0..12).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn redact_is_idempotent(input in text()) {
        let redactor = Redactor::new();
        let once = redactor.redact(&input).into_owned();
        let twice = redactor.redact(&once).into_owned();
        prop_assert_eq!(once, twice);
    }

    #[test]
    fn redact_never_panics_on_any_string(input in any::<String>()) {
        let _ = Redactor::new().redact(&input);
    }

    #[test]
    fn known_values_never_survive(
        secret in "[a-zA-Z0-9_+/=.-]{8,40}",
        before in text(),
        after in text(),
    ) {
        prop_assume!(!MASK.contains(secret.as_str()));
        let redactor = Redactor::new().with_secret(secret.clone());
        let input = format!("{before}{secret}{after}");
        let out = redactor.redact(&input).into_owned();
        prop_assert!(!out.contains(&secret), "{:?} survived in {:?}", secret, out);
        let twice = redactor.redact(&out).into_owned();
        prop_assert_eq!(out, twice);
    }
}
