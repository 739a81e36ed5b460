//! `doorbell trace --svg`: a timeline picture of a short trace, for the docs.
//!
//! One horizontal track per (process, thread), time on the x axis in microseconds from
//! the first record; spans are bars, events are dots coloured by layer, and the arrows of
//! [`crate::flows`] are lines between their two records (crossing tracks where a packet
//! goes from one process to the other).

use std::path::Path;

use plotters::prelude::*;

use crate::chrome::merged;
use crate::flows::link;
use crate::jsonl::{Kind, Proc};

fn layer_colour(target: &str) -> RGBColor {
    match target.split("::").next().unwrap_or("") {
        "provider" => RGBColor(31, 119, 180),
        "uverbs" | "doorbell_preload" => RGBColor(148, 103, 189),
        "softhca" if target.ends_with("tx") || target.ends_with("rx") => RGBColor(214, 39, 40),
        "softhca" => RGBColor(44, 160, 44),
        _ => RGBColor(127, 127, 127),
    }
}

/// Draws `procs` to `path`.
pub fn write(procs: &[Proc], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let recs = merged(procs);
    let flows = link(&recs);
    let mut tracks: Vec<(u32, u64, String)> = Vec::new();
    for p in procs {
        let mut ts: Vec<(u64, String)> = p.recs.iter().map(|r| (r.tid, r.thread.clone())).collect();
        ts.sort();
        ts.dedup_by_key(|t| t.0);
        let prog = p.argv.first().map(|a| a.rsplit('/').next().unwrap_or(a).to_owned()).unwrap_or_default();
        tracks.extend(ts.into_iter().map(|(tid, name)| (p.pid, tid, format!("{prog} {} / {name}", p.pid))));
    }
    let track = |pid: u32, tid: u64| tracks.iter().position(|t| t.0 == pid && t.1 == tid).unwrap_or(0) as f64 + 0.5;
    let t0 = recs.iter().map(|r| r.ts).min().unwrap_or(0);
    let t1 = recs.iter().map(|r| r.end.max(r.ts)).max().unwrap_or(t0 + 1);
    let us = |ns: u64| ns.saturating_sub(t0) as f64 / 1000.0;
    let width = 1400u32;
    let height = 120 + 40 * tracks.len().max(1) as u32;
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = tracks.len().max(1) as f64;
    let labels: Vec<String> = tracks.iter().map(|t| t.2.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption("doorbell trace", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(260)
        .build_cartesian_2d(0f64..us(t1).max(0.001) * 1.02, 0f64..n)?;
    chart
        .configure_mesh()
        .x_desc("time (us)")
        .y_labels(tracks.len().max(1) * 2 + 1)
        .y_label_formatter(&|y| {
            let i = (*y - 0.5).round();
            if (*y - 0.5 - i).abs() < 1e-6 && i >= 0.0 { labels.get(i as usize).cloned().unwrap_or_default() } else { String::new() }
        })
        .disable_y_mesh()
        .draw()?;
    chart.draw_series(recs.iter().filter(|r| r.kind == Kind::Span).map(|r| {
        let y = track(r.pid, r.tid);
        Rectangle::new([(us(r.ts), y - 0.3), (us(r.end), y + 0.3)], layer_colour(&r.target).mix(0.25).filled())
    }))?;
    for f in &flows {
        let (a, b) = (&recs[f.from], &recs[f.to]);
        chart.draw_series(LineSeries::new(vec![(us(a.ts), track(a.pid, a.tid)), (us(b.ts), track(b.pid, b.tid))], BLACK.mix(0.6)))?;
    }
    chart.draw_series(recs.iter().filter(|r| r.kind == Kind::Event).map(|r| {
        Circle::new((us(r.ts), track(r.pid, r.tid)), 3, layer_colour(&r.target).filled())
    }))?;
    root.present()?;
    Ok(())
}
