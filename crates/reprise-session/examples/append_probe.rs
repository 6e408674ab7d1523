//! Temporary probe (removed before finishing).
use std::io::Write;
use std::time::Instant;
fn meta(dir: &std::path::Path, i: usize, mode: u8) {
    let tmp = dir.join(format!(".tmp{i}"));
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp).unwrap();
    f.write_all(format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(100)).as_bytes()).unwrap();
    if mode == 3 { f.sync_data().unwrap(); }
    std::fs::rename(&tmp, dir.join("session.json")).unwrap();
}
fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let line = vec![b'a'; 1000];
    let mut times = [0f64; 4];
    for round in 0..8 {
        for mode in 0..4u8 {
            let path = dir.join(format!("conv{mode}.jsonl"));
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
            let start = Instant::now();
            for i in 0..25 {
                // 0: bare; 1: meta after the sync on every other; 2: meta before the write; 3: meta fsynced, after
                if mode == 2 && i % 2 == 0 { meta(&dir, i, mode); }
                f.write_all(&line).unwrap();
                f.sync_data().unwrap();
                if (mode == 1 || mode == 3) && i % 2 == 0 { meta(&dir, i, mode); }
            }
            if round > 0 { times[mode as usize] += start.elapsed().as_secs_f64(); }
        }
    }
    for (m, t) in times.iter().enumerate() { println!("mode {m}: {:.1} µs  {:.2}x", t / 175.0 * 1e6, t / times[0]); }
}
