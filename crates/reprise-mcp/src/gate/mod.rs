//! The step gate: a policy of tool-name patterns, and the person's answers.

pub mod line_asker;
pub mod policy;
pub mod step_gate;

pub use line_asker::LineAsker;
pub use policy::{GateConfig, GatePolicy, Pattern, PolicyDecision};
pub use step_gate::{
    Decision, GateAnswer, GateAsker, GateDecision, GateMode, GateRequest, StepGate,
};
