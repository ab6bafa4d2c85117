//! A flame graph of a profiled run's own CPU as SVG: the stacks of `cost.profile.flame`, root at
//! the bottom, each frame as wide as its share of the run's samples and coloured by its layer of
//! the stack, with a tooltip (function, layer, samples). Static, like the report's other figures:
//! no script, so many can stand on one page.
use super::svg::{esc, PALETTE};
use crate::record::read::Flame;
use std::fmt::Write;

const W: f64 = 960.0;
const ROW: f64 = 16.0;
const SIDE: f64 = 10.0;
/// The report's palette and six more: a run's stacks often pass through more than ten layers.
const COLOURS: [&str; 16] = [
    PALETTE[0], PALETTE[1], PALETTE[2], PALETTE[3], PALETTE[4], PALETTE[5], PALETTE[6], PALETTE[7], PALETTE[8], PALETTE[9], "#aec7e8",
    "#ff9896", "#98df8a", "#ffbb78", "#c5b0d5", "#c49c94",
];
/// Narrower frames are not drawn (nor their children): invisible, and they would bloat the page.
const MIN_WIDTH: f64 = 0.4;

struct Node {
    name: String,
    layer: String,
    samples: u64,
    children: Vec<usize>,
}

/// The stacks as a tree under one root holding every sample.
fn tree(flame: &Flame) -> Vec<Node> {
    let mut nodes = vec![Node { name: "all".into(), layer: String::new(), samples: 0, children: Vec::new() }];
    let frame = |i: u32| flame.frames.get(i as usize).map(|f| (f.name.clone().unwrap_or_default(), f.layer.clone().unwrap_or_default()));
    let add = |nodes: &mut Vec<Node>, path: &mut dyn Iterator<Item = (String, String)>, n: u64| {
        let mut at = 0;
        nodes[0].samples += n;
        for (name, layer) in path {
            let found = nodes[at].children.iter().copied().find(|&c| nodes[c].name == name);
            at = match found {
                Some(c) => c,
                None => {
                    nodes.push(Node { name, layer, samples: 0, children: Vec::new() });
                    let c = nodes.len() - 1;
                    nodes[at].children.push(c);
                    c
                }
            };
            nodes[at].samples += n;
        }
    };
    for (stack, n) in &flame.stacks {
        add(&mut nodes, &mut stack.iter().filter_map(|&i| frame(i)), *n);
    }
    if let Some(other) = flame.other_samples.filter(|&n| n > 0) {
        add(&mut nodes, &mut std::iter::once(("(rarer stacks, not kept)".to_string(), String::new())), other);
    }
    nodes
}

/// The depth of the deepest frame drawn.
fn depth(nodes: &[Node], at: usize, px_per_sample: f64) -> usize {
    nodes[at]
        .children
        .iter()
        .filter(|&&c| nodes[c].samples as f64 * px_per_sample >= MIN_WIDTH)
        .map(|&c| 1 + depth(nodes, c, px_per_sample))
        .max()
        .unwrap_or(0)
}

/// The SVG, or None when the flame holds no samples.
pub(crate) fn flame_graph(title: &str, flame: &Flame) -> Option<String> {
    let nodes = tree(flame);
    let total = nodes[0].samples;
    if total == 0 {
        return None;
    }
    let px = (W - 2.0 * SIDE) / total as f64;
    let rows = depth(&nodes, 0, px) + 1;
    // Layers by samples, largest first: the legend's order and each layer's colour.
    let mut layers: Vec<(String, u64)> = Vec::new();
    for (stack, n) in &flame.stacks {
        for layer in stack.iter().filter_map(|&i| flame.frames.get(i as usize)?.layer.clone()) {
            match layers.iter_mut().find(|l| l.0 == layer) {
                Some(l) => l.1 += n,
                None => layers.push((layer, *n)),
            }
        }
    }
    layers.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let colour = |layer: &str| layers.iter().position(|l| l.0 == layer).map_or("#cccccc", |i| COLOURS[i % COLOURS.len()]);
    // The legend, wrapped into as many lines as it needs under the title.
    let mut legend = String::new();
    let (mut x, mut y) = (SIDE, 26.0);
    for (layer, _) in &layers {
        let width = 20.0 + 5.6 * layer.chars().count() as f64;
        if x + width > W - SIDE {
            (x, y) = (SIDE, y + 14.0);
        }
        let _ = write!(
            legend,
            r#"<rect x="{x:.1}" y="{y:.1}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="10">{}</text>"#,
            colour(layer),
            x + 13.0,
            y + 9.0,
            esc(layer)
        );
        x += width;
    }
    let h = y + 20.0 + ROW * rows as f64 + 8.0;
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-kind="flame" viewBox="0 0 {W} {h}" width="{W}" height="{h}" font-family="system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif" font-size="11"><rect width="{W}" height="{h}" fill="#fff"/><text x="12" y="17" font-size="13" font-weight="600">{}</text>"##,
        esc(title)
    );
    out.push_str(&legend);
    // Depth first from the root, which stands at the bottom.
    let mut todo = vec![(0usize, SIDE, 0usize)];
    while let Some((at, x, level)) = todo.pop() {
        let n = &nodes[at];
        let w = n.samples as f64 * px;
        let y = h - 8.0 - ROW * (level + 1) as f64;
        let fill = if at == 0 { "#e0e0e0" } else { colour(&n.layer) };
        let label = if at == 0 { format!("all: {total} samples of the run") } else { n.name.clone() };
        let share = 100.0 * n.samples as f64 / total as f64;
        let layer = if n.layer.is_empty() { String::new() } else { format!(" ({})", n.layer) };
        let _ = write!(
            out,
            r##"<g class="mark"><title>{}{}: {} samples, {share:.1} %</title><rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{fill}" stroke="#fff" stroke-width="0.5"/>"##,
            esc(&label),
            esc(&layer),
            n.samples,
            w,
            ROW - 1.0
        );
        let fits = ((w - 6.0) / 6.2).floor() as usize;
        if fits >= 3 {
            let text: String = if label.chars().count() > fits { label.chars().take(fits - 2).collect::<String>() + ".." } else { label };
            let _ = write!(out, r#"<text x="{:.1}" y="{:.1}" font-size="10">{}</text>"#, x + 3.0, y + ROW - 5.0, esc(&text));
        }
        out.push_str("</g>");
        let mut cx = x;
        for &c in &n.children {
            let cw = nodes[c].samples as f64 * px;
            if cw >= MIN_WIDTH {
                todo.push((c, cx, level + 1));
            }
            cx += cw;
        }
    }
    Some(out + "</svg>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::read::FlameFrame;

    fn frame(name: &str, layer: &str) -> FlameFrame {
        FlameFrame { name: Some(name.into()), layer: Some(layer.into()) }
    }

    #[test]
    fn frames_are_as_wide_as_their_samples_and_coloured_by_layer() {
        let flame = Flame {
            samples: Some(4),
            frames: vec![
                frame("iolab", "iolab"),
                frame("do_syscall_64", "system call entry and exit"),
                frame("nvme_queue_rq [nvme]", "device driver"),
            ],
            stacks: vec![(vec![0, 1, 2], 3), (vec![0, 1], 1)],
            other_samples: Some(0),
        };
        let svg = flame_graph("t", &flame).unwrap();
        // The root, iolab, the system call and the driver: four frames.
        assert_eq!(svg.matches(r#"<g class="mark">"#).count(), 4);
        assert!(svg.contains("nvme_queue_rq [nvme] (device driver): 3 samples, 75.0 %"));
        assert!(svg.contains("do_syscall_64 (system call entry and exit): 4 samples, 100.0 %"));
        // The driver's frame is three quarters of the width inside the margins.
        let w = (W - 2.0 * SIDE) * 0.75;
        assert!(svg.contains(&format!(r#"width="{w:.1}""#)));
        assert!(svg.contains(">device driver</text>"), "legend names the layers");
        assert!(flame_graph("t", &Flame::default()).is_none());
    }

    #[test]
    fn rarer_stacks_are_one_frame() {
        let flame = Flame { samples: Some(10), frames: vec![frame("iolab", "iolab")], stacks: vec![(vec![0], 8)], other_samples: Some(2) };
        let svg = flame_graph("t", &flame).unwrap();
        assert!(svg.contains("(rarer stacks, not kept): 2 samples, 20.0 %"));
    }
}
