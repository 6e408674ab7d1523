//! `reprise-sandbox`: `run_command`'s sandbox trampoline alone, for a program that
//! cannot be its own trampoline (one that starts threads before `main`): name this
//! binary in `SandboxSettings::trampoline`.

fn main() {
    reprise_tools::run_trampoline_if_asked();
    eprintln!(
        "reprise-sandbox: run_command starts this program as its sandbox trampoline; \
         it does nothing on its own"
    );
    std::process::exit(2);
}
