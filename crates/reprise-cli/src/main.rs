//! `reprise`: a terminal chat with durable, resumable sessions.

fn main() {
    std::process::exit(reprise_cli::entry::main());
}
