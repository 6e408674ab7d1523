//! The keys several config tables share, each declared once with its doc: the
//! sampling keys (`max_tokens`, `temperature`, `top_p`, `seed`), which the top of
//! the file, a model's table and a subagent's table take, and the model keys (those,
//! with the request, timeout and compaction keys), which the top of the file and a
//! model's table take.
//!
//! A table is declared with [`config_table!`], `@sampling_keys` or `@model_keys`
//! standing where the shared keys go. The keys stay fields of the table itself (not
//! a flattened struct), so that `deny_unknown_fields` still names the line and the
//! key of a mistake.

use reprise_provider::Generation;

/// Declares a config table (a struct) with a set of shared keys where
/// `@sampling_keys` or `@model_keys` stands among its own fields.
macro_rules! config_table {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$before_meta:meta])* pub $before:ident: $before_ty:ty,)*
            @$keys:ident
            $($(#[$after_meta:meta])* pub $after:ident: $after_ty:ty,)*
        }
    ) => {
        $keys! {
            [$(#[$meta])*]
            $name
            [$($(#[$before_meta])* pub $before: $before_ty,)*]
            [$($(#[$after_meta])* pub $after: $after_ty,)*]
        }
    };
}

/// Writes a table with the sampling keys between its own fields, and the method
/// that reads them.
macro_rules! sampling_keys {
    ([$($meta:tt)*] $name:ident [$($before:tt)*] [$($after:tt)*]) => {
        $($meta)*
        pub struct $name {
            $($before)*
            /// The most tokens one reply may have (0: not sent).
            pub max_tokens: Option<u32>,
            /// Sampling temperature.
            pub temperature: Option<$crate::config::values::Finite>,
            /// Nucleus sampling.
            pub top_p: Option<$crate::config::values::Finite>,
            /// A fixed sampling seed.
            pub seed: Option<i64>,
            $($after)*
        }

        impl $name {
            /// The sampling keys this table sets.
            fn sampling(&self) -> $crate::config::keys::Sampling {
                $crate::config::keys::Sampling {
                    max_tokens: self.max_tokens,
                    temperature: self.temperature.map(|number| number.0),
                    top_p: self.top_p.map(|number| number.0),
                    seed: self.seed,
                }
            }
        }
    };
}

/// Writes a table with the model keys between its own fields.
macro_rules! model_keys {
    ([$($meta:tt)*] $name:ident [$($before:tt)*] [$($after:tt)*]) => {
        sampling_keys! {
            [$($meta)*]
            $name
            [
                $($before)*
                /// The most model calls one turn may make.
                pub max_turns: Option<u32>,
            ]
            [
                /// `"auto"`, `"none"`, `"required"`, a tool's name, or a table as the
                /// API takes it.
                pub tool_choice: Option<$crate::config::values::BodyValue>,
                /// Whether the model may call several tools in one reply.
                pub parallel_tool_calls: Option<bool>,
                /// Fields sent as they are in every request body (`[extra_body]`); a
                /// model's table is merged over the top-level one, key by key.
                pub extra_body: Option<$crate::config::values::RequestFields>,
                /// The wait for the first byte of an answer (0: none).
                pub request_timeout: Option<$crate::config::values::DurationValue>,
                /// The longest silence inside a streamed answer (0: none).
                pub idle_timeout: Option<$crate::config::values::DurationValue>,
                /// The wall-clock budget of one turn (0: none).
                pub turn_timeout: Option<$crate::config::values::DurationValue>,
                /// The model's context window in tokens (unset: asked of the server).
                pub context_window: Option<u32>,
                /// The share of the context window a request may fill before the
                /// history is compacted.
                pub compact_threshold: Option<$crate::config::values::WindowShare>,
                /// The most tokens a summary of the older history may have.
                pub summary_max_tokens: Option<u32>,
                $($after)*
            ]
        }
    };
}

/// The sampling keys one layer of settings sets (the flags, a model's table, the
/// top of the file, a subagent's table); unset: that layer does not say.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sampling {
    /// `max_tokens` (0: none sent).
    pub max_tokens: Option<u32>,
    /// `temperature`.
    pub temperature: Option<f64>,
    /// `top_p`.
    pub top_p: Option<f64>,
    /// `seed`.
    pub seed: Option<i64>,
}

impl Sampling {
    /// Each key from this layer, else from `under`.
    pub fn over(self, under: Sampling) -> Sampling {
        Sampling {
            max_tokens: self.max_tokens.or(under.max_tokens),
            temperature: self.temperature.or(under.temperature),
            top_p: self.top_p.or(under.top_p),
            seed: self.seed.or(under.seed),
        }
    }

    /// Sets the keys this layer sets in `generation`; the others stay as they are.
    /// A `max_tokens` of 0 sends none.
    pub fn set_in(self, generation: &mut Generation) {
        if let Some(limit) = self.max_tokens {
            generation.max_tokens = (limit > 0).then_some(limit);
        }
        generation.temperature = self.temperature.or(generation.temperature);
        generation.top_p = self.top_p.or(generation.top_p);
        generation.seed = self.seed.or(generation.seed);
    }
}
