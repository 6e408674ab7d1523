//! The library crates' `tracing` events. The chat's own warnings (a `session.log`
//! that cannot be written, a checkpoint after the calls that failed, a
//! `context-window.json` that cannot be kept), which nothing else says, reach the
//! person: as a notice of the chat once it runs (which the screen shows and writes
//! to the run's `session.log`; never printed over the full screen), else on stderr.
//! With `--log-file FILE`, every event of reprise's crates at the level `RUST_LOG`
//! names (default `debug`) is appended to FILE. With telemetry on, the spans go
//! to OpenTelemetry through a layer of their own beside these.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use reprise_chat::events::UiEvent;
use tokio::sync::mpsc::UnboundedSender;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::FilterFn;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::{LookupSpan, Registry};

/// Where the person's warnings go once a chat runs.
static TO_CHAT: Mutex<Option<UnboundedSender<UiEvent>>> = Mutex::new(None);

/// The crate whose warnings the person is shown (the others' are said otherwise:
/// a retried model call by its notice, a damaged line by the load warnings).
const SHOWN_TARGET: &str = "reprise_chat";

/// Where reprise-telemetry says that the collector cannot be reached.
const TELEMETRY_TARGET: &str = "reprise_telemetry";

/// A layer beside the warnings: the telemetry's.
pub type Extra = Box<dyn Layer<Registry> + Send + Sync + 'static>;

/// Installs the subscriber for the whole process; `log_file`: where every event of
/// reprise's crates at `level` goes too; `extra`: the telemetry's layer.
pub fn install(log_file: Option<&Path>, level: Level, extra: Option<Extra>) -> std::io::Result<()> {
    let file = match log_file {
        Some(path) => Some(Mutex::new(open_log(path)?)),
        None => None,
    };
    let to_file = file.is_some();
    let warnings = Warnings { file, level }.with_filter(FilterFn::new(move |meta| {
        Warnings::for_person(meta) || Warnings::for_file(to_file, level, meta)
    }));
    let subscriber = tracing_subscriber::registry().with(extra).with(warnings);
    // Only fails when a subscriber is there already (a test harness's): keep it.
    let _ = tracing::subscriber::set_global_default(subscriber);
    Ok(())
}

/// From now on, the person's warnings are notices of the chat reading `ui`.
pub fn to_chat(ui: UnboundedSender<UiEvent>) {
    if let Ok(mut sink) = TO_CHAT.lock() {
        *sink = Some(ui);
    }
}

/// The level of detail `RUST_LOG` asks for: a level's name (`error`, `warn`,
/// `info`, `debug`, `trace`, any case); unset or anything else, `debug`.
pub fn level_from_env(value: Option<&str>) -> Level {
    value
        .and_then(|text| text.trim().parse::<Level>().ok())
        .unwrap_or(Level::DEBUG)
}

fn open_log(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

struct Warnings {
    file: Option<Mutex<File>>,
    level: Level,
}

impl Warnings {
    /// The chat's warnings, and the telemetry's one word about a collector it
    /// cannot reach.
    fn for_person(meta: &Metadata<'_>) -> bool {
        *meta.level() <= Level::WARN
            && (meta.target().starts_with(SHOWN_TARGET)
                || meta.target().starts_with(TELEMETRY_TARGET))
    }

    fn for_file(to_file: bool, level: Level, meta: &Metadata<'_>) -> bool {
        to_file && *meta.level() <= level && meta.target().starts_with("reprise")
    }
}

impl<S> Layer<S> for Warnings
where
    S: Subscriber + for<'span> LookupSpan<'span>,
{
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        let mut text = Text::default();
        event.record(&mut text);
        let line = text.line();
        if Self::for_file(self.file.is_some(), self.level, meta)
            && let Some(file) = &self.file
            && let Ok(mut file) = file.lock()
        {
            let now = jiff::Timestamp::now();
            let _ = writeln!(file, "{now} {} {}: {line}", meta.level(), meta.target());
        }
        if Self::for_person(meta) {
            let sent = TO_CHAT.lock().ok().is_some_and(|sink| {
                sink.as_ref()
                    .is_some_and(|ui| ui.send(UiEvent::Warning(line.clone())).is_ok())
            });
            if !sent {
                crate::display::terminal::eprint_line(&format!("! {line}"));
            }
        }
    }
}

/// An event's message, then its other fields as `name=value`.
#[derive(Default)]
struct Text {
    message: String,
    fields: Vec<String>,
}

impl Text {
    fn line(&self) -> String {
        let mut line = self.message.clone();
        for field in &self.fields {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(field);
        }
        line
    }
}

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.fields.push(format!("{}={value:?}", field.name()));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_owned();
        } else {
            self.fields.push(format!("{}={value}", field.name()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_names_a_level_or_the_default_is_debug() {
        assert_eq!(level_from_env(Some("warn")), Level::WARN);
        assert_eq!(level_from_env(Some("TRACE")), Level::TRACE);
        assert_eq!(level_from_env(Some("reprise=info")), Level::DEBUG);
        assert_eq!(level_from_env(None), Level::DEBUG);
    }
}
