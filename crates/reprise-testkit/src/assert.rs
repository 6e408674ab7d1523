//! Assertions with messages that show what was searched.

/// Asserts that `haystack` contains `needle` (anything `str::contains` takes a
/// `&str` of). On failure it prints both, the haystack in full, so the test log shows
/// what was there instead.
///
/// ```
/// use reprise_testkit::assert_contains;
/// assert_contains!("the chat answered", "answered");
/// assert_contains!(String::from("abc"), "b", "while checking {}", "letters");
/// ```
///
/// ```should_panic
/// use reprise_testkit::assert_contains;
/// assert_contains!("the chat answered", "refused");
/// ```
#[macro_export]
macro_rules! assert_contains {
    ($haystack:expr, $needle:expr $(,)?) => {
        // `match` keeps temporaries (a `String` built in the call) alive.
        match (&$haystack, &$needle) {
            (haystack, needle) => {
                let haystack: &str = ::core::convert::AsRef::<str>::as_ref(haystack);
                let needle: &str = ::core::convert::AsRef::<str>::as_ref(needle);
                if !haystack.contains(needle) {
                    ::core::panic!(
                        "assertion failed: the text does not contain the needle\n  needle: {:?}\nhaystack:\n{}",
                        needle, haystack
                    );
                }
            }
        }
    };
    ($haystack:expr, $needle:expr, $($context:tt)+) => {
        match (&$haystack, &$needle) {
            (haystack, needle) => {
                let haystack: &str = ::core::convert::AsRef::<str>::as_ref(haystack);
                let needle: &str = ::core::convert::AsRef::<str>::as_ref(needle);
                if !haystack.contains(needle) {
                    ::core::panic!(
                        "assertion failed: the text does not contain the needle ({})\n  needle: {:?}\nhaystack:\n{}",
                        ::core::format_args!($($context)+), needle, haystack
                    );
                }
            }
        }
    };
}
