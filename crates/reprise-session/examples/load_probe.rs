//! Temporary probe (removed before finishing).
use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()).collect();
    let mb = bytes.len() as f64 / (1 << 20) as f64;
    for _ in 0..2 {
        let start = Instant::now();
        for line in &lines { let _: serde::de::IgnoredAny = serde_json::from_slice(line).unwrap(); }
        println!("serde_json IgnoredAny {:.0} MB/s", mb / start.elapsed().as_secs_f64());
        let start = Instant::now();
        let v: Vec<reprise_session::Entry> = lines.iter().map(|l| serde_json::from_slice(l).unwrap()).collect();
        println!("derived Entry {:.0} MB/s", mb / start.elapsed().as_secs_f64());
        drop(v);
        let start = Instant::now();
        let loaded = reprise_session::jsonl::load_file(path.as_ref(), "big").unwrap().unwrap();
        let s = start.elapsed().as_secs_f64();
        println!("load_file {} entries {:.3}s {:.0} MB/s", loaded.entries.len(), s, mb / s);
    }
}
