//! `reprise`: a terminal chat with durable, resumable sessions.

fn main() {
    // Before anything starts a thread: reprise is run_command's sandbox trampoline
    // (which must be single-threaded) when it starts itself as one.
    reprise_tools::run_trampoline_if_asked();
    std::process::exit(reprise_cli::entry::main());
}
