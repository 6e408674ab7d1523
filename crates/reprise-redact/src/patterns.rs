//! The table of secret formats, one entry per pattern (modelled on atuin's
//! secret-pattern table).
//!
//! Conventions, so that the engine can treat every entry alike:
//! - The secret is the first participating capture group named `s`, `s2`, `s3`, …;
//!   a pattern without such a group masks its whole match. Context around the
//!   secret (`password=`, `Bearer `, `user:` in a URL) stays readable.
//! - A group named `key` holds the name a value was assigned to (for [`Check::Assignment`]).
//! - `\b` is compiled as an ASCII word boundary, which keeps the fast DFA engines
//!   usable on non-ASCII text.
//! - `sample` is text that must be redacted and `secret` the part of it that must
//!   disappear; a unit test checks both for every entry.

/// What must also hold, beyond the regex, for a match to be masked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// The regex alone decides: the format is specific enough.
    Always,
    /// The secret holds at least one ASCII digit (keeps ordinary words out).
    HasDigit,
    /// The secret is not a placeholder (`$VAR`, `<…>`, `xxxx`, `{{…}}`, …).
    NotPlaceholder,
    /// The secret is not made only of capitals, digits and `_` (a constant's name).
    NotUpperWord,
    /// The secret is not made only of lowercase letters and digits (a hash, a word).
    NotLowerHex,
    /// The secret holds a capital, a lowercase letter and a digit, as a random
    /// base64 string of its length nearly always does, and a word or a path
    /// seldom does.
    RandomLooking,
    /// A value assigned to a secret-looking name: rules depend on the name's class.
    Assignment,
    /// A command-line flag value: not a placeholder, not the next flag.
    Flag,
}

/// One secret format.
pub(crate) struct Pattern {
    /// A short, stable name (used in tests and docs).
    pub name: &'static str,
    /// The regex (Rust `regex` syntax).
    pub regex: &'static str,
    /// Extra condition on the secret.
    pub check: Check,
    /// Text containing a secret of this format.
    #[cfg_attr(not(test), allow(dead_code))] // read by the unit tests
    pub sample: &'static str,
    /// The part of `sample` that must not survive redaction.
    #[cfg_attr(not(test), allow(dead_code))] // read by the unit tests
    pub secret: &'static str,
}

const fn p(
    name: &'static str,
    regex: &'static str,
    check: Check,
    sample: &'static str,
    secret: &'static str,
) -> Pattern {
    Pattern {
        name,
        regex,
        check,
        sample,
        secret,
    }
}

use Check::{
    Always, Assignment, Flag, HasDigit, NotLowerHex, NotPlaceholder, NotUpperWord, RandomLooking,
};

/// Every pattern the redactor applies.
pub(crate) const PATTERNS: &[Pattern] = &[
    // ---- Private keys -------------------------------------------------------------
    p(
        "pem_private_key",
        // The body up to the END line, or to the end of the text when it was cut off.
        r"(?s)-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?P<s>.*?)(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\z)",
        NotPlaceholder,
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn\n-----END RSA PRIVATE KEY-----",
        "MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn",
    ),
    p(
        "pem_private_key_base64",
        r"\bLS0tLS1CRUdJTi[A-Za-z0-9+/]{0,40}?(?:UFJJVkFURSBLRV|BSSVZBVEUgS0VZ|QUklWQVRFIEtFW)[A-Za-z0-9+/=]*",
        Always,
        "PRIVATE_KEY_B64=LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb2dJQkFB",
        "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb2dJQkFB",
    ),
    p(
        "age_secret_key",
        r"\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b",
        Always,
        "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ",
        "QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ",
    ),
    p(
        "password_hash_crypt",
        r"\$(?:1|2[abxy]?|5|6|7|8|y|gy)\$(?:rounds=[0-9]+\$)?[./A-Za-z0-9]{2,30}\$[./A-Za-z0-9]{20,}",
        Always,
        "root:$6$saltsalt$Zr0WvJ3n3m1sTJ3b9CuUWbFj1l3X9zQ0A1b2c3d4e5f6:19000",
        "Zr0WvJ3n3m1sTJ3b9CuUWbFj1l3X9zQ0A1b2c3d4e5f6",
    ),
    p(
        "password_hash_bcrypt",
        r"\$2[abxy]\$[0-9]{2}\$[./A-Za-z0-9]{53}",
        Always,
        "hash = $2b$12$abcdefghijklmnopqrstuuQ1Ew0k9aG2n3cYVZrZ1y0aW5m8LdKpe",
        "abcdefghijklmnopqrstuuQ1Ew0k9aG2n3cYVZrZ1y0aW5m8LdKpe",
    ),
    p(
        "kerberos_hash",
        r"\$krb5(?:asrep|tgs|pa)\$[0-9]+\$[^\s]{20,}",
        Always,
        "$krb5asrep$23$user@example.com:3e156ada591263b8aab0965f5aebd837$0074",
        "3e156ada591263b8aab0965f5aebd837",
    ),
    // ---- Cloud providers ----------------------------------------------------------
    p(
        "aws_access_key_id",
        r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}\b",
        Always,
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
        "AKIAIOSFODNN7EXAMPLE",
    ),
    p(
        "aws_secret_after_access_key_id",
        // The 40-character secret access key written after its key id on the same
        // line, with no name of its own (`AKIA… wJalr…`, `AKIA…:wJalr…`), as people
        // paste the pair. Base64 characters on neither side: exactly 40.
        r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b[^\n]{0,100}?[^A-Za-z0-9/+=\n](?P<s>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|\z)",
        RandomLooking,
        "use AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY for the bucket",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    p(
        "aws_mws_token",
        r"\bamzn\.mws\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
        Always,
        "MWS Token: amzn.mws.4ea38b7b-f563-7709-4bae-87aea15c1234",
        "4ea38b7b-f563-7709-4bae-87aea15c1234",
    ),
    p(
        "aws_appsync_key",
        r"\bda2-[a-z0-9]{26}\b",
        Always,
        "apiKey: 'da2-abcdefghijklmnopqrstuvwxyz'",
        "da2-abcdefghijklmnopqrstuvwxyz",
    ),
    p(
        "google_api_key",
        r"\bAIza[0-9A-Za-z_-]{35}",
        Always,
        "key=AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
        "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    ),
    p(
        "google_oauth_client_secret",
        r"\bGOCSPX-[A-Za-z0-9_-]{28}",
        Always,
        "secret: GOCSPX-AbCdEfGhIjKlMnOpQrStUvWxYz12",
        "GOCSPX-AbCdEfGhIjKlMnOpQrStUvWxYz12",
    ),
    p(
        "google_oauth_access_token",
        r"\bya29\.[0-9A-Za-z_-]{20,}",
        Always,
        "token ya29.A0ARrdaM-abcdefghijklmnopqrstuvwxyz012345",
        "ya29.A0ARrdaM-abcdefghijklmnopqrstuvwxyz012345",
    ),
    p(
        "azure_devops_pat",
        r"\b[A-Za-z0-9]{76}AZDO[A-Za-z0-9]{4}\b",
        Always,
        "pat=0123456789abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdefAZDOwxyz",
        "0123456789abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdefAZDOwxyz",
    ),
    p(
        "ibm_softlayer_url_key",
        r"api\.softlayer\.com/soap/v3(?:\.1)?/(?P<s>[a-z0-9]{64})\b",
        Always,
        "http://api.softlayer.com/soap/v3/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ),
    p(
        "digitalocean_token",
        r"\bdo[opr]_v1_[a-f0-9]{64}\b",
        Always,
        "DO_TOKEN=dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ),
    p(
        "databricks_token",
        r"\bdapi[a-f0-9]{32}(?:-[0-9]+)?\b",
        Always,
        "DATABRICKS_TOKEN: dapi0123456789abcdef0123456789abcdef",
        "dapi0123456789abcdef0123456789abcdef",
    ),
    p(
        "alibaba_access_key_id",
        r"\bLTAI[A-Za-z0-9]{17,21}\b",
        HasDigit,
        "accessKeyId: LTAI5tAbCdEfGhIjKlMnOp12",
        "LTAI5tAbCdEfGhIjKlMnOp12",
    ),
    // ---- Source forges and CI -----------------------------------------------------
    p(
        "github_token",
        r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b",
        Always,
        "GITHUB_TOKEN=ghp_0123456789abcdefghijABCDEFGHIJ012345",
        "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    ),
    p(
        "github_fine_grained_pat",
        r"\bgithub_pat_[A-Za-z0-9_]{22,255}",
        Always,
        "token: github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRST",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRST",
    ),
    p(
        "gitlab_token",
        r"\bgl(?:pat|dt|soat|cbt|imt|ptt|agent|oas|rt|ft|ct|ffct|wt)-[A-Za-z0-9_-]{20,}",
        Always,
        "GL_TOKEN=glpat-AbCdEfGhIj0123456789",
        "glpat-AbCdEfGhIj0123456789",
    ),
    p(
        "gitlab_runner_registration_token",
        r"\bGR1348941[A-Za-z0-9_-]{20,}",
        Always,
        "--registration-token GR1348941AbCdEfGhIj0123456789",
        "GR1348941AbCdEfGhIj0123456789",
    ),
    p(
        "bitbucket_app_password",
        r"\bATBB[A-Za-z0-9_=.-]{28,}",
        Always,
        "https://me:ATBB0123456789abcdefABCDEF012345@bitbucket.org/x",
        "ATBB0123456789abcdefABCDEF012345",
    ),
    p(
        "atlassian_api_token",
        r"\bATATT3[A-Za-z0-9_=-]{100,}",
        Always,
        "JIRA_API_TOKEN=ATATT3xFfGF0abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz=0A1B2C3D",
        "ATATT3xFfGF0abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz=0A1B2C3D",
    ),
    p(
        "artifactory_api_key",
        r"\bAKC[A-Za-z0-9]{10,}\b",
        Always,
        "X-JFrog-Art-Api: AKCp8abcdefghij0123456789",
        "AKCp8abcdefghij0123456789",
    ),
    p(
        "artifactory_password",
        r#"(?:^|[\s=:"'])(?P<s>AP[0-9A-F][A-Za-z0-9]{8,})\b"#,
        NotUpperWord,
        "artifactory_password=AP6abcdefghij0123",
        "AP6abcdefghij0123",
    ),
    p(
        "npm_token",
        r"\bnpm_[A-Za-z0-9]{36}\b",
        Always,
        "//registry.npmjs.org/:_authToken=npm_0123456789abcdefghijABCDEFGHIJ012345",
        "npm_0123456789abcdefghijABCDEFGHIJ012345",
    ),
    p(
        "pypi_token",
        r"\bpypi-AgE[A-Za-z0-9_-]{50,}",
        Always,
        "password = pypi-AgEIcHlwaS5vcmcCJDkwNzYwNzU1LWMwOTUtNGNkOC1iYjQzLTU3OWNh",
        "pypi-AgEIcHlwaS5vcmcCJDkwNzYwNzU1LWMwOTUtNGNkOC1iYjQzLTU3OWNh",
    ),
    p(
        "rubygems_token",
        r"\brubygems_[a-f0-9]{48}\b",
        Always,
        "GEM_HOST_API_KEY: rubygems_0123456789abcdef0123456789abcdef0123456789abcdef",
        "rubygems_0123456789abcdef0123456789abcdef0123456789abcdef",
    ),
    p(
        "nuget_api_key",
        r"\boy2[a-z0-9]{43}\b",
        Always,
        "nuget push x.nupkg oy2abcdefghijklmnopqrstuvwxyz0123456789abcdefg",
        "oy2abcdefghijklmnopqrstuvwxyz0123456789abcdefg",
    ),
    p(
        "crates_io_token",
        r"\bcio[a-zA-Z0-9]{32}\b",
        HasDigit,
        "CARGO_REGISTRY_TOKEN=cioAbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "cioAbCdEfGhIjKlMnOpQrStUvWxYz012345",
    ),
    p(
        "dockerhub_pat",
        r"\bdckr_pat_[A-Za-z0-9_-]{27,}",
        Always,
        "docker login -u me -p dckr_pat_AbCdEfGhIjKlMnOpQrStUvWxYz0",
        "dckr_pat_AbCdEfGhIjKlMnOpQrStUvWxYz0",
    ),
    p(
        "hashicorp_vault_token",
        r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}",
        Always,
        "VAULT_TOKEN=hvs.CAESIAbCdEfGhIjKlMnOpQrStUvWxYz0123",
        "hvs.CAESIAbCdEfGhIjKlMnOpQrStUvWxYz0123",
    ),
    p(
        "hashicorp_vault_legacy_token",
        // `s.`/`b.`/`r.` are also ordinary member accesses: demand a digit and no dot before.
        r"(?:^|[^A-Za-z0-9_.])(?P<s>[sbr]\.[A-Za-z0-9_-]{24,})\b",
        HasDigit,
        "VAULT_CLIENT_TOKEN=\"s.Z4bTMtngfLeQ18AqVoBBkUAOD1\"",
        "s.Z4bTMtngfLeQ18AqVoBBkUAOD1",
    ),
    p(
        "hashicorp_vault_unseal_key",
        r"(?i)\bunseal(?:[ \t]+key[ \t]+[0-9]+:)?[ \t]+(?P<s>[A-Za-z0-9+/]{40,}={0,2})",
        Always,
        "Unseal Key 1: 0tZn+7QQCxphpHwTm7/dC3LpP5JGIbYl3PK8Sy81R+P2",
        "0tZn+7QQCxphpHwTm7/dC3LpP5JGIbYl3PK8Sy81R+P2",
    ),
    p(
        "terraform_cloud_token",
        r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}",
        Always,
        "token = \"AbCdEfGhIjKlMn.atlasv1.0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqr\"",
        "AbCdEfGhIjKlMn.atlasv1.0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqr",
    ),
    p(
        "sonarqube_token",
        r"(?i)sonar[._]?login[^A-Za-z0-9\n]{1,6}(?P<s>[0-9a-f]{40})\b",
        Always,
        "-Dsonar.login=0123456789abcdef0123456789abcdef01234567",
        "0123456789abcdef0123456789abcdef01234567",
    ),
    p(
        "sonarqube_new_token",
        r"\bsq[apu]_[a-f0-9]{40}\b",
        Always,
        "SONAR_TOKEN=sqp_0123456789abcdef0123456789abcdef01234567",
        "sqp_0123456789abcdef0123456789abcdef01234567",
    ),
    p(
        "doppler_token",
        r"\bdp\.(?:ct|pt|st|sa|scim|audit)\.[A-Za-z0-9._-]{40,}",
        Always,
        "DOPPLER_TOKEN=dp.st.dev.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdef",
        "dp.st.dev.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdef",
    ),
    p(
        "dependency_track_key",
        r"\bodt_[A-Za-z0-9]{32,}\b",
        Always,
        "X-Api-Key: odt_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "odt_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    ),
    p(
        "grafana_api_key",
        r"\beyJrIjoi[A-Za-z0-9+/=_-]{40,}",
        Always,
        "Authorization: Bearer eyJrIjoiAbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdef",
        "eyJrIjoiAbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdef",
    ),
    p(
        "grafana_cloud_token",
        r"\bglc_[A-Za-z0-9+/=_-]{32,}",
        Always,
        "\"token\": \"glc_eyJvIjoiMTIzNDU2NyIsIm4iOiJzdGFjayJ9AbCd\"",
        "glc_eyJvIjoiMTIzNDU2NyIsIm4iOiJzdGFjayJ9AbCd",
    ),
    p(
        "grafana_service_account_token",
        r"\bglsa_[A-Za-z0-9]{32}_[a-f0-9]{8}\b",
        Always,
        "Bearer glsa_AbCdEfGhIjKlMnOpQrStUvWxYz012345_0a1b2c3d",
        "glsa_AbCdEfGhIjKlMnOpQrStUvWxYz012345_0a1b2c3d",
    ),
    p(
        "dynatrace_token",
        r"\bdt0[a-z][0-9]{2}\.[A-Z0-9]{24}\.[A-Z0-9]{64}\b",
        Always,
        "apiToken: dt0c01.ABCDEFGHIJKLMNOPQRSTUVWX.ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ01",
        "dt0c01.ABCDEFGHIJKLMNOPQRSTUVWX.ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ01",
    ),
    // ---- Chat, mail, payments, SaaS -----------------------------------------------
    p(
        "slack_token",
        r"\bxox[abposre]-(?:[0-9]+-)*[A-Za-z0-9-]{10,}",
        Always,
        "SLACK_BOT_TOKEN=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    p(
        "slack_app_token",
        r"\bxapp-[A-Za-z0-9/+_-]{20,}",
        Always,
        "SLACK_APP_TOKEN=xapp-1-A0123456789-0123456789012-abcdef0123456789",
        "xapp-1-A0123456789-0123456789012-abcdef0123456789",
    ),
    p(
        "slack_webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9+/_-]{20,})",
        Always,
        "https://hooks.slack.com/services/T00000000/B00000000/AbCdEfGhIjKlMnOpQrStUvWx",
        "T00000000/B00000000/AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    p(
        "msteams_webhook",
        r"(?i)\.(?:office|office365|webhook\.office)\.com/webhook(?:b2)?/(?P<s>[A-Za-z0-9@/%_-]{30,})",
        Always,
        "https://outlook.office.com/webhook/0a1b2c3d-0000-1111-2222-333344445555@0a1b2c3d/IncomingWebhook/abc/def",
        "0a1b2c3d-0000-1111-2222-333344445555@0a1b2c3d/IncomingWebhook/abc/def",
    ),
    p(
        "discord_bot_token",
        r"\b[A-Z][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}",
        HasDigit,
        "DISCORD_TOKEN=MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
        "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
    ),
    p(
        "telegram_bot_token",
        r"\b[0-9]{8,10}:AA[A-Za-z0-9_-]{32,}",
        Always,
        "bot_token = 123456789:AAAbCdEfGhIjKlMnOpQrStUvWxYz0123456",
        "123456789:AAAbCdEfGhIjKlMnOpQrStUvWxYz0123456",
    ),
    p(
        "stripe_secret_key",
        r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}",
        Always,
        "Stripe.api_key = \"sk_live_AbCdEfGhIjKlMnOpQrSt0123\"",
        "sk_live_AbCdEfGhIjKlMnOpQrSt0123",
    ),
    p(
        "square_token",
        r"\b(?:sandbox-)?sq0(?:atp|csp|atb)-[A-Za-z0-9_\\-]{22,}",
        Always,
        "SQUARE_TOKEN=sq0atp-AbCdEfGhIjKlMnOpQrStUv",
        "sq0atp-AbCdEfGhIjKlMnOpQrStUv",
    ),
    p(
        "sendgrid_api_key",
        r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b",
        Always,
        "SENDGRID_API_KEY=SG.AbCdEfGhIjKlMnOpQrStUv.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefg",
        "SG.AbCdEfGhIjKlMnOpQrStUv.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefg",
    ),
    p(
        "mailchimp_api_key",
        r"\b[0-9a-f]{32}-us[0-9]{1,2}\b",
        Always,
        "MAILCHIMP_KEY=0123456789abcdef0123456789abcdef-us13",
        "0123456789abcdef0123456789abcdef-us13",
    ),
    p(
        "mailgun_api_key",
        r"\bkey-[0-9a-f]{32}\b",
        Always,
        "api: 'key-0123456789abcdef0123456789abcdef'",
        "key-0123456789abcdef0123456789abcdef",
    ),
    p(
        "twilio_key",
        r"\b(?:SK|AC)[A-Za-z0-9]{32}\b",
        Always,
        "TWILIO_API_KEY_SID=SK0123456789abcdef0123456789abcdef",
        "SK0123456789abcdef0123456789abcdef",
    ),
    p(
        "shopify_token",
        r"\bshp(?:ss|at|ca|pa)_[a-fA-F0-9]{32}\b",
        Always,
        "SHOPIFY_TOKEN=shpat_0123456789abcdef0123456789abcdef",
        "shpat_0123456789abcdef0123456789abcdef",
    ),
    p(
        "postman_api_key",
        r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b",
        Always,
        "x-api-key: PMAK-0123456789abcdef01234567-0123456789abcdef0123456789abcdef01",
        "PMAK-0123456789abcdef01234567-0123456789abcdef0123456789abcdef01",
    ),
    p(
        "newrelic_key",
        r"\bNR(?:AK|AA|II|IQ|RA|JS)-[A-Za-z0-9_-]{19,}",
        Always,
        "NEW_RELIC_API_KEY=NRAK-ABCDEFGHIJKLMNOPQRSTUVWXYZ0",
        "NRAK-ABCDEFGHIJKLMNOPQRSTUVWXYZ0",
    ),
    p(
        "newrelic_license_key",
        r"\b[A-Za-z0-9]{36}NRAL\b",
        Always,
        "license_key: 0123456789abcdef0123456789abcdef0123NRAL",
        "0123456789abcdef0123456789abcdef0123NRAL",
    ),
    p(
        "newrelic_pixie_key",
        r"\bpx-(?:dep|api)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
        Always,
        "PX_API_KEY=px-api-01234567-89ab-cdef-0123-456789abcdef",
        "px-api-01234567-89ab-cdef-0123-456789abcdef",
    ),
    p(
        "salesforce_access_token",
        r"\b00[A-Za-z0-9]{13}![A-Za-z0-9._]{80,}",
        Always,
        "Access Token 00DE0X0A0M0PeLE!AQcAQH0dMHEXAMPLEzmpkb58urFRkgeBGsxL_QJWwYMfAbUeeG7c1EXAMPLEDUkWe6H34r1AAwOR8B8fLEz6nEXAMP",
        "00DE0X0A0M0PeLE!AQcAQH0dMHEXAMPLEzmpkb58urFRkgeBGsxL_QJWwYMfAbUeeG7c1EXAMPLEDUkWe6H34r1AAwOR8B8fLEz6nEXAMP",
    ),
    p(
        "okta_api_token",
        r"\b00[A-Za-z0-9_-]{40}\b",
        // Plain lowercase hex (hashes) is left alone: Okta tokens mix case or carry `-`/`_`.
        NotLowerHex,
        "Authorization: SSWS 00QCjAl4MlV-WPXM-ABCDEFGHIJKL-0HmjFx-vbGua",
        "00QCjAl4MlV-WPXM-ABCDEFGHIJKL-0HmjFx-vbGua",
    ),
    p(
        "dropbox_token",
        r"\bsl\.[A-Za-z0-9_-]{100,}",
        Always,
        "Bearer sl.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "sl.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    ),
    p(
        "facebook_access_token",
        r"\bEAA[A-Za-z0-9]{8}[A-Za-z0-9]{20,}",
        HasDigit,
        "access_token=EAACEdEose0cBAAbCdEfGhIjKlMnOpQrStUvWxYz0123",
        "EAACEdEose0cBAAbCdEfGhIjKlMnOpQrStUvWxYz0123",
    ),
    p(
        "mapbox_token",
        r"\b[spt]k\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
        Always,
        "MAPBOX_TOKEN=sk.eyJ1IjoiZXhhbXBsZSIsImEiOiJjazAifQ.AbCdEfGhIjKlMnOpQrStUv",
        "sk.eyJ1IjoiZXhhbXBsZSIsImEiOiJjazAifQ.AbCdEfGhIjKlMnOpQrStUv",
    ),
    p(
        "twitch_stream_key",
        r"\blive_[0-9]{6,}_[A-Za-z0-9]{30}\b",
        Always,
        "STREAM_KEY=live_123456789_AbCdEfGhIjKlMnOpQrStUvWxYz0123",
        "live_123456789_AbCdEfGhIjKlMnOpQrStUvWxYz0123",
    ),
    p(
        "adafruit_io_key",
        r"\baio_[A-Za-z0-9]{28}\b",
        Always,
        "IO_KEY = \"aio_AbCdEfGhIjKlMnOpQrStUvWx0123\"",
        "aio_AbCdEfGhIjKlMnOpQrStUvWx0123",
    ),
    p(
        "adobe_client_secret",
        r"\bp8e-[A-Za-z0-9_-]{32}\b",
        Always,
        "\"client_secret\": \"p8e-AbCdEfGhIjKlMnOpQrStUvWxYz012345\"",
        "p8e-AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    ),
    p(
        "sourcegraph_token",
        r"\bsgp_(?:local_|[a-f0-9]{16}_)?[a-f0-9]{40}\b",
        Always,
        "access token sgp_0123456789abcdef0123456789abcdef01234567",
        "sgp_0123456789abcdef0123456789abcdef01234567",
    ),
    p(
        "segment_token",
        r"\bsgp_[A-Za-z0-9]{64}\b",
        Always,
        "\"token\": \"sgp_0123456789abcdefABCDEF0123456789abcdefABCDEF0123456789abcdefABCD\"",
        "sgp_0123456789abcdefABCDEF0123456789abcdefABCDEF0123456789abcdefABCD",
    ),
    p(
        "stackhawk_api_key",
        r"\bhawk\.[A-Za-z0-9_-]{20}\.[A-Za-z0-9_-]{20}\b",
        Always,
        "HAWK_API_KEY=hawk.AbCdEfGhIjKlMnOpQrSt.AbCdEfGhIjKlMnOpQrSt",
        "hawk.AbCdEfGhIjKlMnOpQrSt.AbCdEfGhIjKlMnOpQrSt",
    ),
    p(
        "tavily_api_key",
        r"\btvly-[A-Za-z0-9]{32}\b",
        Always,
        "TAVILY_API_KEY=tvly-AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "tvly-AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    ),
    p(
        "firecrawl_api_key",
        r"\bfc-[a-f0-9]{32}\b",
        Always,
        "FirecrawlApp(api_key=\"fc-0123456789abcdef0123456789abcdef\")",
        "fc-0123456789abcdef0123456789abcdef",
    ),
    p(
        "jina_api_key",
        r"\bjina_[A-Za-z0-9]{60}\b",
        Always,
        "JINA_KEY=jina_0123456789abcdef0123456789abcdefAbCdEfGhIjKlMnOpQrStUvWxYz01",
        "jina_0123456789abcdef0123456789abcdefAbCdEfGhIjKlMnOpQrStUvWxYz01",
    ),
    p(
        "truenas_api_key",
        r"\b[0-9]{1,4}-[A-Za-z0-9]{64}\b",
        HasDigit,
        "\"params\": [\"1-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQrStUvWxYz01\"]",
        "1-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQrStUvWxYz01",
    ),
    p(
        "thingsboard_access_token",
        r"(?i)thingsboard\.cloud/api/v1/(?P<s>[a-z0-9]{20})\b",
        Always,
        "https://thingsboard.cloud/api/v1/abcdefghij0123456789/telemetry",
        "abcdefghij0123456789",
    ),
    // ---- LLM providers ------------------------------------------------------------
    p(
        "anthropic_api_key",
        r"\bsk-ant-[A-Za-z0-9_-]{20,}",
        Always,
        "ANTHROPIC_API_KEY=sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-AbCdEfGhIj",
        "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-AbCdEfGhIj",
    ),
    p(
        "openai_api_key",
        // Old keys, `sk-proj-`, `sk-svcacct-`, `sk-admin-`: all `sk-` + a long token.
        r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}",
        HasDigit,
        "OPENAI_API_KEY=sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    ),
    p(
        "groq_api_key",
        r"\bgsk_[A-Za-z0-9]{40,}\b",
        Always,
        "GROQ_API_KEY=gsk_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKl",
        "gsk_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKl",
    ),
    p(
        "xai_api_key",
        r"\bxai-[A-Za-z0-9_-]{40,}",
        Always,
        "XAI_API_KEY=xai-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQrSt",
        "xai-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQrSt",
    ),
    p(
        "replicate_api_token",
        r"\br8_[A-Za-z0-9]{30,}\b",
        Always,
        "REPLICATE_API_TOKEN=r8_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "r8_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    ),
    p(
        "huggingface_token",
        r"\b(?:hf|api_org)_[A-Za-z0-9]{30,}\b",
        Always,
        "HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
        "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    ),
    p(
        "elevenlabs_api_key",
        r"\bsk_[a-f0-9]{48}\b",
        Always,
        "ELEVENLABS_API_KEY=sk_0123456789abcdef0123456789abcdef0123456789abcdef",
        "sk_0123456789abcdef0123456789abcdef0123456789abcdef",
    ),
    p(
        "deepgram_api_key",
        r#"(?i)deepgram[A-Za-z0-9_.-]*(?:[ \t]+(?:secret|token|key|api[_-]?key))?[ \t]*[:=]?[ \t]*["']?(?P<s>[A-Za-z0-9]{40})\b"#,
        HasDigit,
        "deepgram token 0123456789abcdef0123456789abcdef01234567",
        "0123456789abcdef0123456789abcdef01234567",
    ),
    // ---- Tokens by shape ----------------------------------------------------------
    p(
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{10,}\.(?:eyJ[A-Za-z0-9_-]{10,}(?:\.[A-Za-z0-9_-]*)?|[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})",
        Always,
        "Authorization: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    // ---- Credentials by context ---------------------------------------------------
    p(
        "url_credentials",
        // scheme://user:password@host — the password only; it may itself hold `@`.
        r#"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@"'<>]*:(?P<s>[^\s/"'<>]+)@[A-Za-z0-9\[._%-]"#,
        NotPlaceholder,
        "DATABASE_URL=postgres://app:hunter22@db.example.com:5432/app",
        "hunter22",
    ),
    p(
        "authorization_header",
        r#"(?i)\bauthorization["']?[ \t]*[:=][ \t]*["'`]?(?:(?:basic|bearer|token|ssws|bot|digest|apikey|key)[ \t]+)?(?P<s>[A-Za-z0-9._~+/=:-]{8,})"#,
        NotPlaceholder,
        "curl -H 'Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=='",
        "QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
    ),
    p(
        "bearer_token",
        r"(?i)\bbearer:?[ \t]+(?P<s>[A-Za-z0-9._~+/=-]{8,})",
        HasDigit,
        "-H \"Authorization: Bearer mF_9.B5f-4.1JqM\"",
        "mF_9.B5f-4.1JqM",
    ),
    p(
        "secret_assignment",
        // `name = value`, `name: value`, `"name": "value"`, `name => 'value'`,
        // `name == "value"`, `name 'value'`: the name ends in a secret-looking word.
        concat!(
            r#"(?i)(?P<key>[A-Za-z0-9_.$-]*?(?:passw(?:or)?d|passwd|passphrase|pwd|pass|secret|token|key|credentials?|[_.-]pat|[_.-]pw))"#,
            r#"["'`]?[ \t]*"#,
            r#"(?:(?:==|!=)[ \t]*(?:"(?P<s>(?:[^"\\\n]|\\.)*)"|'(?P<s2>(?:[^'\\\n]|\\.)*)')"#,
            r#"|(?:=>|:=|=|:)[ \t]*(?:\\"(?P<s3>[^"\\\n]*)\\"|"(?P<s4>(?:[^"\\\n]|\\.)*)"|'(?P<s5>(?:[^'\\\n]|\\.)*)'|`(?P<s6>[^`\n]*)`|(?P<s7>[^\s"'`,;&<>(){}\[\]]+))"#,
            r#"|[ \t]+(?:"(?P<s8>(?:[^"\\\n]|\\.)*)"|'(?P<s9>(?:[^'\\\n]|\\.)*)'))"#,
        ),
        Assignment,
        "db_password = \"correct horse battery\"",
        "correct horse battery",
    ),
    p(
        "secret_flag",
        r#"(?im)(?:^|[ \t])--?(?P<key>[A-Za-z0-9-]*(?:password|passwd|pwd|pass|token|secret|api-?key|access-?key|auth-?key))(?:=|[ \t]+)(?:"(?P<s>[^"\n]*)"|'(?P<s2>[^'\n]*)'|(?P<s3>[^\s"']+))"#,
        Flag,
        "mysql --password=Sup3rSecret -h db",
        "Sup3rSecret",
    ),
    p(
        "user_and_password_flags",
        r#"(?m)(?:^|[ \t])-u[ \t]+\S+[ \t]+-p[ \t]*(?:"(?P<s>[^"\n]+)"|(?P<s2>[^\s"']+))"#,
        Flag,
        "psexec \\\\host -u admin -p Hunter22 cmd",
        "Hunter22",
    ),
    p(
        "user_colon_password_flag",
        r#"(?m)(?:^|[ \t])(?:-u|--user)[ \t]+["']?[^\s:"']+:(?P<s>[^\s"']+)"#,
        Flag,
        "curl -u client-id:Sup3rSecretValue https://example.com",
        "Sup3rSecretValue",
    ),
    p(
        "netrc_password",
        r"(?i)\bmachine[ \t]+\S+\s+login[ \t]+\S+\s+password[ \t]+(?P<s>\S+)",
        NotPlaceholder,
        "machine api.example.com login me password s3cr3tpass",
        "s3cr3tpass",
    ),
    p(
        "password_in_prose",
        r#"(?i)\bpassw(?:or)?d\b(?:[ \t]+for[ \t]+(?:the[ \t]+)?user[ \t]+["'][^"'\n]{1,64}["'])?[ \t]+is:?[ \t]+["'](?P<s>[^"'\n]{2,64})["']"#,
        NotPlaceholder,
        "The default password is 'blooberry'",
        "blooberry",
    ),
    p(
        "xml_key_value_secret",
        r#"(?i)<add[ \t]+key="[^"\n]*(?:password|pwd|secret|token|apikey|api_key|accesskey)"[ \t]+value="(?P<s>[^"\n]*)""#,
        NotPlaceholder,
        "<add key=\"SmtpPassword\" value=\"Prestigitariu$\"/>",
        "Prestigitariu$",
    ),
    p(
        "env_default_secret",
        // `env('API_KEY', 'fallback')`, `os.getenv("TOKEN", "fallback")`: the fallback.
        r#"(?i)\b(?:env|getenv|get)\(\s*["'](?P<key>[A-Za-z0-9_.-]*(?:key|token|secret|password|passwd|pass|pwd))["']\s*,\s*["'](?P<s>[^"'\n]+)["']"#,
        Assignment,
        "'key' => env('TWILIO_API_KEY', 'wbTs1SUt6Aace5eKeNCxuYvJa6PhaRd0'),",
        "wbTs1SUt6Aace5eKeNCxuYvJa6PhaRd0",
    ),
    p(
        "jenkins_initial_admin_password",
        r"(?i)use the following password to proceed to installation:\s+(?P<s>[a-f0-9]{32})\b",
        Always,
        "Please use the following password to proceed to installation:\n\n0123456789abcdef0123456789abcdef\n",
        "0123456789abcdef0123456789abcdef",
    ),
    p(
        "codeclimate_reporter_id",
        r#"(?i)\bcc_test_reporter_id["']?[ \t]*[:=][ \t]*["']?(?P<s>[a-f0-9]{64})\b"#,
        Always,
        "CC_TEST_REPORTER_ID: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ),
    p(
        "dotnet_network_credential",
        r#"(?i)NetworkCredential\(\s*"[^"\n]*"\s*,\s*"(?P<s>[^"\n]+)""#,
        NotPlaceholder,
        "new NetworkCredential(\"me@example.com\", \"vzihlaquknriqlht\");",
        "vzihlaquknriqlht",
    ),
    p(
        "dotnet_directory_entry",
        r#"(?i)DirectoryEntry\(\s*"[^"\n]*"\s*,\s*"[^"\n]*"\s*,\s*"(?P<s>[^"\n]+)""#,
        NotPlaceholder,
        "new DirectoryEntry(\"LDAP://example.com\", \"admin\", \"Rrhh1234\");",
        "Rrhh1234",
    ),
];
