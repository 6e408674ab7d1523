use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let data = std::fs::read(&path).unwrap();
    let mb = data.len() as f64 / 1048576.0;
    let lines: Vec<&[u8]> = data.split(|b| *b == b'\n').filter(|l| !l.is_empty()).collect();
    let t = Instant::now();
    let mut n = 0;
    for _ in memchr::memchr_iter(b'\n', &data) { n += 1; }
    println!("memchr lines {n}: {:.0} MB/s", mb / t.elapsed().as_secs_f64());
    let t = Instant::now();
    for l in &lines { let _: serde::de::IgnoredAny = serde_json::from_slice(l).unwrap(); }
    println!("IgnoredAny: {:.0} MB/s", mb / t.elapsed().as_secs_f64());
    let t = Instant::now();
    let v: Vec<serde_json::Value> = lines.iter().map(|l| serde_json::from_slice(l).unwrap()).collect();
    println!("Value: {:.0} MB/s", mb / t.elapsed().as_secs_f64());
    drop(v);
    let t = Instant::now();
    let v: Vec<reprise_session::Message> = lines.iter().map(|l| { let e: serde_json::Value = serde_json::from_slice(l).unwrap(); serde_json::from_value(e["message"].clone()).unwrap() }).collect();
    println!("Value->Message: {:.0} MB/s", mb / t.elapsed().as_secs_f64());
    drop(v);
    let t = Instant::now();
    let v: Vec<reprise_session::Entry> = lines.iter().map(|l| serde_json::from_slice(l).unwrap()).collect();
    println!("Entry: {:.0} MB/s", mb / t.elapsed().as_secs_f64());
    drop(v);
}
