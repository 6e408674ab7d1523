//! Where telemetry goes: a program's settings, then the standard `OTEL_*`
//! variables, which win (a variable set for one run says more than a file).

/// The OTLP transport.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP over HTTP with protobuf bodies (`http/protobuf`, port 4318).
    #[default]
    HttpProtobuf,
    /// OTLP over gRPC (`grpc`, port 4317).
    Grpc,
}

impl Protocol {
    /// Reads `http/protobuf` or `grpc`, as `OTEL_EXPORTER_OTLP_PROTOCOL` spells them.
    pub fn parse(text: &str) -> Option<Protocol> {
        match text.trim() {
            "http/protobuf" | "http" => Some(Protocol::HttpProtobuf),
            "grpc" => Some(Protocol::Grpc),
            _ => None,
        }
    }
}

/// What to export and where. The default exports nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TelemetryConfig {
    /// The collector's base address (`http://localhost:4318`); for HTTP the
    /// signal's path (`/v1/traces`, `/v1/metrics`) is added.
    pub endpoint: Option<String>,
    /// The transport; `None`: `http/protobuf`.
    pub protocol: Option<Protocol>,
    /// Whether to export traces; `None`: when an endpoint is set.
    pub traces: Option<bool>,
    /// Whether to export metrics; `None`: when an endpoint is set.
    pub metrics: Option<bool>,
    /// The `service.name` of the resource; `None`: `reprise`.
    pub service_name: Option<String>,
    /// Headers sent with every export (an API key of a hosted backend).
    pub headers: Vec<(String, String)>,
    /// Whether spans carry message, argument and result text (redacted).
    pub capture_content: bool,
}

/// The configuration with the environment applied: what [`crate::Telemetry`] starts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Resolved {
    /// Passed to the exporter only when no `OTEL_EXPORTER_OTLP_*ENDPOINT` variable is
    /// set (the exporter reads those itself).
    pub endpoint: Option<String>,
    pub protocol: Protocol,
    pub traces: bool,
    pub metrics: bool,
    /// `None` when the environment names the service.
    pub service_name: Option<String>,
    pub headers: Vec<(String, String)>,
}

const ENDPOINT_VARS: [&str; 3] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
];

impl TelemetryConfig {
    /// Whether anything is to be exported, with `env` (a variable's value by name)
    /// applied.
    pub fn is_on(&self, env: impl Fn(&str) -> Option<String>) -> bool {
        let resolved = self.resolve(env);
        resolved.traces || resolved.metrics
    }

    /// The standard variables applied: an endpoint variable turns export on,
    /// `OTEL_TRACES_EXPORTER`/`OTEL_METRICS_EXPORTER` `none` turn a signal off and
    /// `otlp` on, `OTEL_EXPORTER_OTLP_PROTOCOL` chooses the transport.
    pub(crate) fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> Resolved {
        let env = |name: &str| env(name).filter(|value| !value.trim().is_empty());
        let env_endpoint = ENDPOINT_VARS.iter().any(|name| env(name).is_some());
        let has_endpoint = env_endpoint || self.endpoint.is_some();
        let signal = |exporter_var: &str, endpoint_var: &str, configured: Option<bool>| match env(
            exporter_var,
        )
        .as_deref()
        .map(str::trim)
        {
            Some("none") => false,
            Some(_) => true,
            None => {
                configured.unwrap_or(has_endpoint || env(endpoint_var).is_some() || env_endpoint)
            }
        };
        let protocol = env("OTEL_EXPORTER_OTLP_PROTOCOL")
            .and_then(|text| Protocol::parse(&text))
            .or(self.protocol)
            .unwrap_or_default();
        let env_names_service = env("OTEL_SERVICE_NAME").is_some()
            || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attributes| {
                attributes
                    .split(',')
                    .any(|pair| pair.trim_start().starts_with("service.name="))
            });
        Resolved {
            endpoint: if env_endpoint {
                None
            } else {
                self.endpoint.clone()
            },
            protocol,
            traces: signal(
                "OTEL_TRACES_EXPORTER",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                self.traces,
            ),
            metrics: signal(
                "OTEL_METRICS_EXPORTER",
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                self.metrics,
            ),
            service_name: (!env_names_service).then(|| {
                self.service_name
                    .clone()
                    .unwrap_or_else(|| "reprise".to_owned())
            }),
            headers: self.headers.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn nothing_set_exports_nothing() {
        let config = TelemetryConfig::default();
        assert!(!config.is_on(env_of(&[])));
    }

    #[test]
    fn an_endpoint_variable_turns_both_signals_on() {
        let resolved = TelemetryConfig::default()
            .resolve(env_of(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4318")]));
        assert!(resolved.traces && resolved.metrics);
        assert_eq!(resolved.endpoint, None, "the exporter reads the variable");
        assert_eq!(resolved.service_name.as_deref(), Some("reprise"));
    }

    #[test]
    fn variables_win_over_the_configuration() {
        let config = TelemetryConfig {
            endpoint: Some("http://configured:4318".to_owned()),
            protocol: Some(Protocol::HttpProtobuf),
            service_name: Some("mine".to_owned()),
            ..TelemetryConfig::default()
        };
        let resolved = config.resolve(env_of(&[
            ("OTEL_METRICS_EXPORTER", "none"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_SERVICE_NAME", "theirs"),
        ]));
        assert!(resolved.traces);
        assert!(!resolved.metrics);
        assert_eq!(resolved.protocol, Protocol::Grpc);
        assert_eq!(resolved.endpoint.as_deref(), Some("http://configured:4318"));
        assert_eq!(
            resolved.service_name, None,
            "the SDK reads OTEL_SERVICE_NAME"
        );
    }

    #[test]
    fn a_signal_can_be_turned_off_in_the_configuration() {
        let config = TelemetryConfig {
            endpoint: Some("http://c:4318".to_owned()),
            metrics: Some(false),
            ..TelemetryConfig::default()
        };
        let resolved = config.resolve(env_of(&[]));
        assert!(resolved.traces && !resolved.metrics);
    }
}
