//! The config file parser on any text: it returns a config or an error, never
//! panics. Bytes that are not UTF-8 go through `read_config` (from a file), the rest
//! through `parse_config`.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use reprise_chat::config::{parse_config, read_config};

fuzz_target!(|data: &[u8]| {
    let path = Path::new("config.toml");
    match std::str::from_utf8(data) {
        Ok(text) => {
            if let Ok(config) = parse_config(path, text) {
                // What the chat does next with a config it accepted.
                if let Some(gate) = &config.gate {
                    let policy = reprise_mcp::GatePolicy::from_config(gate)
                        .expect("a config that parsed has a valid [gate]");
                    let _ = policy.decide("town__demolish_house");
                }
            }
        }
        Err(_) => {
            let file =
                std::env::temp_dir().join(format!("reprise-fuzz-config-{}", std::process::id()));
            std::fs::write(&file, data).expect("write the config file");
            let _ = read_config(&file);
        }
    }
});
