//! Temporary probe (removed before finishing).
fn cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let f: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}
fn main() {
    let path = std::env::args().nth(1).unwrap();
    for _ in 0..5 {
        let c = cpu();
        let start = std::time::Instant::now();
        let loaded = reprise_session::jsonl::load_file(path.as_ref(), "big").unwrap().unwrap();
        let wall = start.elapsed().as_secs_f64();
        let c = cpu() - c;
        println!("{} wall {:.0} MB/s, cpu {:.2}s = {:.0} MB per cpu-second", loaded.entries.len(), 101.2 / wall, c, 101.2 / c);
    }
}
