//! Charts as SVG text: line/scatter charts on linear or log2 axes with 95 % CI error bars,
//! marked points and a legend; tile maps; "not available here" panels.
//!
//! Hand-written rather than `plotters`: plotters measures text through font-kit and system font
//! files to lay out labels, which a report meant to render the same offline everywhere should not
//! depend on; and the report needs per-point tooltips (`<title>`) and marks the page's check can
//! count (`class="mark"`), which are a few lines here. Text uses the viewer's system font stack.
use std::fmt::Write;

const W: f64 = 660.0;
const H: f64 = 360.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 190.0; // room for the legend
const TOP: f64 = 46.0; // room for a two-line title
const BOTTOM: f64 = 52.0;
pub(super) const PALETTE: [&str; 10] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Numbers for axis ticks and labels: three significant digits with k/M/G.
pub fn short_number(x: f64) -> String {
    let a = x.abs();
    let (v, suffix) = if a >= 1e9 {
        (x / 1e9, "G")
    } else if a >= 1e6 {
        (x / 1e6, "M")
    } else if a >= 1e3 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    let digits = if v.abs() >= 100.0 || v == v.trunc() {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    let mut s = format!("{v:.digits$}");
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    s + suffix
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    Linear,
    Log2,
}

#[derive(Clone, Debug)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
}

#[derive(Clone, Debug)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    /// Half-width of the 95 % confidence interval of y (drawn as an error bar).
    pub ci: Option<f64>,
    /// Tooltip text.
    pub tip: String,
    /// Drawn hollow: a replicate was flagged as an outlier or polling fell back.
    pub flagged: bool,
}

#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<Point>,
}

/// A point called out on the chart (e.g. a saturation point).
#[derive(Clone, Debug)]
pub struct Callout {
    pub x: f64,
    pub y: f64,
    pub text: String,
}

#[derive(Clone, Debug)]
pub struct Chart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    pub callouts: Vec<Callout>,
    /// Join each series' points with a line (false: scatter only).
    pub lines: bool,
}

struct Mapping {
    lo: f64,
    hi: f64,
    scale: Scale,
    from: f64,
    to: f64,
}

impl Mapping {
    fn t(&self, v: f64) -> f64 {
        let (a, b, v) = match self.scale {
            Scale::Linear => (self.lo, self.hi, v),
            Scale::Log2 => (self.lo.log2(), self.hi.log2(), v.max(f64::MIN_POSITIVE).log2()),
        };
        let f = if b > a { (v - a) / (b - a) } else { 0.5 };
        self.from + f * (self.to - self.from)
    }

    fn ticks(&self) -> Vec<f64> {
        match self.scale {
            Scale::Log2 => {
                let (a, b) = (self.lo.log2().floor() as i32, self.hi.log2().ceil() as i32);
                let step = ((b - a) / 8).max(1);
                (a..=b).step_by(step as usize).map(|e| 2f64.powi(e)).filter(|v| *v >= self.lo * 0.999 && *v <= self.hi * 1.001).collect()
            }
            Scale::Linear => {
                let span = (self.hi - self.lo).max(f64::MIN_POSITIVE);
                let raw = span / 5.0;
                let mag = 10f64.powf(raw.log10().floor());
                let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| span / s <= 6.0).unwrap_or(10.0 * mag);
                let mut v = (self.lo / step).ceil() * step;
                let mut out = Vec::new();
                while v <= self.hi + step * 1e-9 {
                    out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
                    v += step;
                }
                out
            }
        }
    }
}

fn range(values: impl Iterator<Item = f64>, scale: Scale) -> (f64, f64) {
    let v: Vec<f64> = values.filter(|x| x.is_finite() && (scale == Scale::Linear || *x > 0.0)).collect();
    let (mut lo, mut hi) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    if !lo.is_finite() {
        return (1.0, 2.0);
    }
    match scale {
        // Linear axes start at zero so bar-like comparisons are honest; a little headroom on top.
        Scale::Linear => {
            lo = lo.min(0.0);
            hi = if hi > lo { hi + (hi - lo) * 0.06 } else { lo + 1.0 };
        }
        Scale::Log2 => {
            if hi <= lo {
                lo /= 2.0;
                hi *= 2.0;
            }
        }
    }
    (lo, hi)
}

fn header(out: &mut String, title: &str, kind: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-kind="{kind}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif" font-size="12">"#
    );
    let _ = write!(out, r##"<rect width="{W}" height="{H}" fill="#fff"/>"##);
    for (i, line) in wrap(title, 84).iter().take(2).enumerate() {
        let _ = write!(out, r#"<text x="12" y="{}" font-size="13" font-weight="600">{}</text>"#, 17 + 16 * i, esc(line));
    }
}

/// Words into lines of at most `width` characters (a longer word gets a line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line += word;
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// A line or scatter chart. Points outside a log axis' domain (≤ 0) are left out, and the chart
/// says how many.
pub fn chart(c: &Chart) -> String {
    let xs = c.series.iter().flat_map(|s| s.points.iter().map(|p| p.x));
    let ys =
        c.series.iter().flat_map(|s| s.points.iter().flat_map(|p| [p.y + p.ci.unwrap_or(0.0), p.y - p.ci.unwrap_or(0.0).min(p.y * 0.999)]));
    let (xlo, xhi) = range(xs, c.x.scale);
    let (ylo, yhi) = range(ys, c.y.scale);
    let (px0, px1, py0, py1) = (LEFT, W - RIGHT, H - BOTTOM, TOP);
    let mx = Mapping { lo: xlo, hi: xhi, scale: c.x.scale, from: px0 + 8.0, to: px1 - 8.0 };
    let my = Mapping { lo: ylo, hi: yhi, scale: c.y.scale, from: py0, to: py1 };
    let mut out = String::new();
    header(&mut out, &c.title, "chart");
    let _ = write!(out, r##"<rect x="{px0}" y="{py1}" width="{}" height="{}" fill="none" stroke="#999"/>"##, px1 - px0, py0 - py1);
    for t in mx.ticks() {
        let x = mx.t(t);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{py0}" x2="{x:.1}" y2="{}" stroke="#666"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            py0 + 4.0,
            py0 + 17.0,
            short_number(t)
        );
    }
    for t in my.ticks() {
        let y = my.t(t);
        let _ = write!(
            out,
            r##"<line x1="{px0}" y1="{y:.1}" x2="{px1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            px0 - 5.0,
            y + 4.0,
            short_number(t)
        );
    }
    let _ = write!(out, r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#, (px0 + px1) / 2.0, H - 12.0, esc(&c.x.label));
    let _ = write!(
        out,
        r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (py0 + py1) / 2.0,
        esc(&c.y.label)
    );
    let mut dropped = 0;
    for (i, s) in c.series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let shown: Vec<&Point> = s
            .points
            .iter()
            .filter(|p| {
                let ok = p.x.is_finite()
                    && p.y.is_finite()
                    && (c.x.scale == Scale::Linear || p.x > 0.0)
                    && (c.y.scale == Scale::Linear || p.y > 0.0);
                dropped += usize::from(!ok);
                ok
            })
            .collect();
        if c.lines && shown.len() > 1 {
            let d: Vec<String> = shown.iter().map(|p| format!("{:.1},{:.1}", mx.t(p.x), my.t(p.y))).collect();
            let _ = write!(out, r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="1.6"/>"#, d.join(" "));
        }
        for p in shown {
            let (x, y) = (mx.t(p.x), my.t(p.y));
            if let Some(ci) = p.ci.filter(|c| *c > 0.0) {
                let (a, b) = (my.t(p.y - ci.min(if c.y.scale == Scale::Log2 { p.y * 0.999 } else { ci })), my.t(p.y + ci));
                let _ = write!(
                    out,
                    r#"<path d="M{x:.1},{a:.1}V{b:.1}M{:.1},{a:.1}h6M{:.1},{b:.1}h6" stroke="{colour}" fill="none"/>"#,
                    x - 3.0,
                    x - 3.0
                );
            }
            let fill = if p.flagged { "#fff" } else { colour };
            let _ = write!(
                out,
                r#"<circle class="mark" cx="{x:.1}" cy="{y:.1}" r="3.6" fill="{fill}" stroke="{colour}" stroke-width="1.5"><title>{}</title></circle>"#,
                esc(&p.tip)
            );
        }
        let ly = TOP + 10.0 + i as f64 * 17.0;
        let _ = write!(
            out,
            r#"<g class="legend"><title>{}</title><rect x="{}" y="{:.1}" width="12" height="12" fill="{colour}"/><text x="{}" y="{:.1}">{}</text></g>"#,
            esc(&s.name),
            px1 + 12.0,
            ly - 10.0,
            px1 + 28.0,
            ly,
            esc(&legend_name(&s.name))
        );
    }
    for m in &c.callouts {
        if (c.x.scale == Scale::Log2 && m.x <= 0.0) || (c.y.scale == Scale::Log2 && m.y <= 0.0) {
            continue;
        }
        let (x, y) = (mx.t(m.x), my.t(m.y));
        // Keep the label inside the plot: left of points in the right half, below points near the top.
        let (tx, anchor) = if x > (px0 + px1) / 2.0 { (x - 10.0, "end") } else { (x + 10.0, "start") };
        let ty = if y < py1 + 24.0 { y + 22.0 } else { y - 10.0 };
        let _ = write!(
            out,
            r##"<circle cx="{x:.1}" cy="{y:.1}" r="8" fill="none" stroke="#000" stroke-width="2"/><text x="{tx:.1}" y="{ty:.1}" text-anchor="{anchor}" font-weight="600">{}</text>"##,
            esc(&m.text)
        );
    }
    if dropped > 0 {
        let _ = write!(
            out,
            r##"<text x="{px0}" y="{}" fill="#a00">{dropped} point(s) not drawable on a log axis (value ≤ 0)</text>"##,
            H - 28.0
        );
    }
    out + "</svg>"
}

/// A series' name as the legend has room for it (26 characters); an overlaid series keeps what
/// follows its first " · " (its device or machine, `Config::series`) whole where it fits, the
/// full name is the legend entry's tooltip.
fn legend_name(name: &str) -> String {
    const ROOM: usize = 26;
    match name.split_once(" · ") {
        Some((head, tail)) if name.chars().count() > ROOM && tail.chars().count() + 8 <= ROOM => {
            format!("{} · {tail}", truncate(head, ROOM - 3 - tail.chars().count()))
        }
        _ => truncate(name, ROOM),
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

/// One tile of a map.
#[derive(Clone, Debug)]
pub struct Tile {
    pub col: usize,
    pub row: usize,
    /// Big text (e.g. the winning method) and small lines under it (e.g. "+12 % over irq").
    pub text: String,
    pub sub: Vec<String>,
    /// Tiles with the same key share a colour (e.g. the winning method); empty or [`TIE_KEY`] = grey.
    pub key: String,
    pub tip: String,
}

#[derive(Clone, Debug)]
pub struct TileMap {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub cols: Vec<String>,
    pub rows: Vec<String>,
    pub tiles: Vec<Tile>,
}

/// The key "tie" is grey: a tied tile has no winner to colour.
pub const TIE_KEY: &str = "tie";

fn key_colour(keys: &[&str], key: &str) -> &'static str {
    match keys.iter().filter(|k| **k != TIE_KEY).position(|k| *k == key) {
        Some(i) => PALETTE[i % PALETTE.len()],
        None => "#b0b0b0",
    }
}

pub fn tile_map(m: &TileMap) -> String {
    let mut keys: Vec<&str> = m.tiles.iter().map(|t| t.key.as_str()).filter(|k| !k.is_empty()).collect();
    keys.sort();
    keys.dedup();
    let (px0, px1, py0, py1) = (LEFT, W - RIGHT, TOP + 6.0, H - BOTTOM);
    let cw = (px1 - px0) / m.cols.len().max(1) as f64;
    let rh = (py1 - py0) / m.rows.len().max(1) as f64;
    let mut out = String::new();
    header(&mut out, &m.title, "map");
    for (i, c) in m.cols.iter().enumerate() {
        let _ = write!(out, r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#, px0 + (i as f64 + 0.5) * cw, py1 + 16.0, esc(c));
    }
    for (i, r) in m.rows.iter().enumerate() {
        let _ = write!(out, r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#, px0 - 6.0, py0 + (i as f64 + 0.5) * rh + 4.0, esc(r));
    }
    let _ = write!(out, r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#, (px0 + px1) / 2.0, H - 12.0, esc(&m.x_label));
    let _ = write!(
        out,
        r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (py0 + py1) / 2.0,
        esc(&m.y_label)
    );
    // Characters that fit across a tile at a glyph width (px); the tooltip has the whole text.
    let fit = |glyph: f64| ((cw - 6.0) / glyph).max(4.0) as usize;
    for t in &m.tiles {
        let colour = key_colour(&keys, &t.key);
        let (x, y) = (px0 + t.col as f64 * cw, py0 + t.row as f64 * rh);
        let top = y + rh / 2.0 - 6.0 * t.sub.len() as f64;
        let _ = write!(
            out,
            r##"<g class="mark"><title>{}</title><rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{colour}" fill-opacity="0.55" stroke="#fff" stroke-width="2"/><text x="{:.1}" y="{top:.1}" text-anchor="middle" font-weight="600">{}</text>"##,
            esc(&t.tip),
            cw,
            rh,
            x + cw / 2.0,
            esc(&truncate(&t.text, fit(7.5)))
        );
        for (i, line) in t.sub.iter().enumerate() {
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"#,
                x + cw / 2.0,
                top + 14.0 + 13.0 * i as f64,
                esc(&truncate(line, fit(6.2)))
            );
        }
        out += "</g>";
    }
    for (i, k) in keys.iter().enumerate() {
        let ly = TOP + 16.0 + i as f64 * 17.0;
        let _ = write!(
            out,
            r#"<rect x="{}" y="{:.1}" width="12" height="12" fill="{}" fill-opacity="0.55"/><text x="{}" y="{:.1}">{}</text>"#,
            px1 + 12.0,
            ly - 10.0,
            key_colour(&keys, k),
            px1 + 28.0,
            ly,
            esc(&truncate(k, 26))
        );
    }
    out + "</svg>"
}

/// Stacked bars: one bar per label, its parts stacked in the order given (one colour per part
/// name, the same in every bar), a tooltip per part with its value.
pub struct StackedBars {
    pub title: String,
    pub y_label: String,
    pub bars: Vec<(String, Vec<(String, f64)>)>,
}

pub fn stacked_bars(c: &StackedBars) -> String {
    let mut out = String::new();
    header(&mut out, &c.title, "stacked-bars");
    let mut parts: Vec<&str> = Vec::new();
    for (_, ps) in &c.bars {
        for (name, _) in ps {
            if !parts.contains(&name.as_str()) {
                parts.push(name);
            }
        }
    }
    let top = c.bars.iter().map(|(_, ps)| ps.iter().map(|p| p.1.max(0.0)).sum::<f64>()).fold(0.0, f64::max);
    let y = Mapping { lo: 0.0, hi: if top > 0.0 { top } else { 1.0 }, scale: Scale::Linear, from: H - BOTTOM, to: TOP + 8.0 };
    for t in y.ticks() {
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{y0:.1}" y2="{y0:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end" font-size="10">{}</text>"##,
            W - RIGHT,
            LEFT - 4.0,
            y.t(t) + 3.0,
            short_number(t),
            y0 = y.t(t)
        );
    }
    let _ = write!(
        out,
        r#"<text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle" font-size="11">{}</text>"#,
        (TOP + H - BOTTOM) / 2.0,
        esc(&c.y_label)
    );
    let slot = (W - RIGHT - LEFT) / c.bars.len().max(1) as f64;
    for (i, (label, ps)) in c.bars.iter().enumerate() {
        let x = LEFT + slot * i as f64 + slot * 0.15;
        let mut base = 0.0;
        for (name, v) in ps {
            let v = v.max(0.0);
            let colour = PALETTE[parts.iter().position(|p| p == name).unwrap_or(0) % PALETTE.len()];
            let (y1, y2) = (y.t(base + v), y.t(base));
            let _ = write!(
                out,
                r#"<rect class="mark" x="{x:.1}" y="{y1:.1}" width="{:.1}" height="{:.1}" fill="{colour}"><title>{}: {} ({})</title></rect>"#,
                slot * 0.7,
                (y2 - y1).max(0.0),
                esc(label),
                esc(name),
                short_number(v)
            );
            base += v;
        }
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
            x + slot * 0.35,
            H - BOTTOM + 14.0,
            esc(&label.chars().take((slot / 6.0) as usize).collect::<String>())
        );
    }
    for (i, name) in parts.iter().enumerate() {
        let ly = TOP + 10.0 + 14.0 * i as f64;
        let _ = write!(
            out,
            r#"<rect x="{}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{}" y="{:.1}" font-size="10">{}</text>"#,
            W - RIGHT + 10.0,
            ly - 9.0,
            PALETTE[i % PALETTE.len()],
            W - RIGHT + 24.0,
            ly,
            esc(&name.chars().take(30).collect::<String>())
        );
    }
    out + "</svg>"
}

/// A panel standing where a figure would be when the machine could not produce its data, and
/// whether the whole reason fitted in it (the caller puts it in the caption otherwise).
pub fn unavailable(title: &str, reason: &str) -> (String, bool) {
    const MAX_LINES: usize = 16;
    let mut out = String::new();
    header(&mut out, title, "unavailable");
    let _ = write!(
        out,
        r##"<rect x="12" y="{TOP}" width="{}" height="{}" fill="#fafafa" stroke="#bbb" stroke-dasharray="5 4"><title>{}</title></rect>"##,
        W - 24.0,
        H - TOP - 12.0,
        esc(reason)
    );
    let _ = write!(out, r##"<text class="unavailable" x="26" y="{}" font-weight="600" fill="#a00">Not available here</text>"##, TOP + 24.0);
    // Long sysfs explanations are wrapped by words to stay inside the panel.
    let lines = wrap(reason, 104);
    for (i, line) in lines.iter().take(MAX_LINES).enumerate() {
        let _ = write!(out, r#"<text x="26" y="{}" font-size="11">{}</text>"#, TOP + 44.0 + 15.0 * i as f64, esc(line));
    }
    (out + "</svg>", lines.len() <= MAX_LINES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(x: f64, y: f64) -> Point {
        Point { x, y, ci: Some(1.0), tip: format!("{x},{y}"), flagged: false }
    }

    #[test]
    fn ticks_on_both_scales() {
        let log = Mapping { lo: 1.0, hi: 64.0, scale: Scale::Log2, from: 0.0, to: 100.0 };
        assert_eq!(log.ticks(), vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]);
        assert_eq!((log.t(1.0), log.t(8.0), log.t(64.0)), (0.0, 50.0, 100.0));
        let lin = Mapping { lo: 0.0, hi: 1060.0, scale: Scale::Linear, from: 0.0, to: 1.0 };
        assert_eq!(lin.ticks(), vec![0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]);
        assert_eq!(short_number(125_000.0), "125k");
        assert_eq!(short_number(2.5e6), "2.5M");
        assert_eq!(short_number(0.25), "0.25");
    }

    #[test]
    fn one_mark_per_drawable_point_and_the_rest_said() {
        let c = Chart {
            title: "t".into(),
            x: Axis { label: "qd".into(), scale: Scale::Log2 },
            y: Axis { label: "IOPS".into(), scale: Scale::Linear },
            series: vec![Series { name: "a".into(), points: vec![pt(1.0, 10.0), pt(2.0, 20.0), pt(0.0, 5.0)] }],
            callouts: vec![],
            lines: true,
        };
        let svg = chart(&c);
        assert_eq!(svg.matches("class=\"mark\"").count(), 2);
        assert!(svg.contains("1 point(s) not drawable on a log axis"));
        assert!(svg.contains("<title>1,10</title>"));
    }

    #[test]
    fn unavailable_panel_wraps_and_says_whether_it_fits() {
        let (svg, fits) = unavailable("Power", "no RAPL here");
        assert!(fits && svg.contains("data-kind=\"unavailable\"") && svg.contains("Not available here") && svg.contains("no RAPL here"));
        let long = "word ".repeat(1000);
        assert!(!unavailable("Power", &long).1);
        assert_eq!(wrap("aa bb cc", 5), vec!["aa bb", "cc"]);
    }
}
