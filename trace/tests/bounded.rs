//! The recording layer's buffer is bounded: a long run reaches the file as it goes,
//! not only at exit (its own test binary: the layer's sink is per process).

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::Layer as _;

#[test]
fn records_reach_the_file_before_exit_once_the_buffer_fills() {
    let dir = std::env::temp_dir().join(format!("doorbell-trace-bounded.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let layer = doorbell_trace::RecordLayer::new(&dir).unwrap().with_filter(doorbell_trace::record::targets());
    let file = dir.join(format!("{}.jsonl", std::process::id()));
    let sub = tracing_subscriber::registry().with(layer);
    let mut sizes = Vec::new();
    tracing::subscriber::with_default(sub, || {
        // About 200 bytes a line: 4 x FLUSH_BYTES of records.
        let per = 200;
        let n = 4 * doorbell_trace::record::FLUSH_BYTES / per;
        for i in 0..n {
            tracing::trace!(target: "softhca::tx", opcode = "RcRdmaWriteOnly", qpn = 264u32, psn = i as u64, len = 8usize, "tx");
            if i % (n / 8) == 0 {
                sizes.push(std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0));
            }
        }
    });
    let before_flush = std::fs::metadata(&file).unwrap().len();
    doorbell_trace::record::flush();
    let after = std::fs::metadata(&file).unwrap().len();
    let _ = std::fs::remove_dir_all(&dir);
    // The file grows during the run, and what waits in memory is at most one buffer.
    assert!(sizes.windows(2).any(|w| w[1] > w[0]), "file sizes during the run: {sizes:?}");
    assert!(after - before_flush <= doorbell_trace::record::FLUSH_BYTES as u64 + 4096,
            "{} bytes were still buffered", after - before_flush);
    assert!(after as usize >= 3 * doorbell_trace::record::FLUSH_BYTES, "the file holds every record: {after} bytes");
}
