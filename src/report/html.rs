//! One self-contained HTML page: styles and scripts inline, figures as inline SVG, no fonts or
//! anything else fetched (a system font stack), so it opens the same offline. The inline script
//! also checks the page after load (every figure drew, no error) and leaves the result on
//! <body> for the headless-browser test: data-figures, data-drawn, data-not-drawn, data-errors.
use super::sections::{Item, Section};
use super::svg::esc;

const STYLE: &str = r#"
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 2rem auto; max-width: 1180px; padding: 0 1rem; color: #222; line-height: 1.4; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { border-bottom: 2px solid #ddd; padding-bottom: .2rem; margin-top: 2.5rem; }
.meta, .prov, .about { color: #555; font-size: .85rem; } .about { font-style: italic; }
figure.fig { display: inline-block; vertical-align: top; margin: .5rem .5rem .5rem 0; border: 1px solid #e4e4e4; padding: .4rem; width: calc(50% - 1.6rem); min-width: 420px; }
figure.fig svg { width: 100%; height: auto; display: block; }
figcaption { font-size: .78rem; color: #444; }
table { border-collapse: collapse; font-size: .82rem; margin: .4rem 0; } th, td { border: 1px solid #ddd; padding: .2rem .45rem; text-align: left; }
th { background: #f4f4f4; } tbody tr:nth-child(odd) { background: #fafafa; }
.note { font-size: .85rem; color: #444; } .callout { background: #fff7e0; border-left: 4px solid #e0a800; padding: .3rem .6rem; font-size: .88rem; }
nav ol { columns: 2; font-size: .85rem; } .files { font-size: .75rem; color: #777; }
#readout { position: fixed; bottom: 0; right: 0; background: #222; color: #fff; font-size: .8rem; padding: .3rem .6rem; display: none; max-width: 60%; }
"#;

// Runs first so that errors in anything after it are caught.
const CATCH: &str = r#"<script>
window.__errors = [];
window.addEventListener('error', function (e) { window.__errors.push(String(e.message || (e.target && e.target.outerHTML) || e)); }, true);
window.addEventListener('unhandledrejection', function (e) { window.__errors.push('unhandled rejection: ' + e.reason); });
(function () { var orig = console.error; console.error = function () { window.__errors.push(Array.prototype.join.call(arguments, ' ')); return orig.apply(console, arguments); }; })();
</script>"#;

const CHECK: &str = r#"<script>
window.addEventListener('load', function () {
  var figs = document.querySelectorAll('figure.fig'), drawn = 0, bad = [];
  figs.forEach(function (f) {
    var svg = f.querySelector('svg'), ok = false;
    if (svg) {
      var r = svg.getBoundingClientRect(), b = svg.getBBox();
      var unavailable = svg.getAttribute('data-kind') === 'unavailable' && svg.querySelector('.unavailable') !== null;
      ok = r.width > 0 && r.height > 0 && b.width > 0 && b.height > 0 && (svg.querySelector('.mark') !== null || unavailable);
    }
    if (ok) { drawn++; } else { bad.push(f.id); }
  });
  // Hovering a data mark shows its values in a corner box as well as the native tooltip.
  var readout = document.getElementById('readout');
  document.querySelectorAll('.mark').forEach(function (m) {
    var t = m.querySelector('title');
    m.addEventListener('mouseenter', function () { readout.textContent = t ? t.textContent : ''; readout.style.display = 'block'; });
    m.addEventListener('mouseleave', function () { readout.style.display = 'none'; });
  });
  var body = document.body;
  body.setAttribute('data-figures', figs.length);
  body.setAttribute('data-drawn', drawn);
  body.setAttribute('data-not-drawn', bad.join(' '));
  body.setAttribute('data-errors', window.__errors.length);
  body.setAttribute('data-error-text', window.__errors.join(' | '));
  body.setAttribute('data-checked', 'yes');
});
</script>"#;

/// Everything above the sections.
pub struct Header {
    pub title: String,
    pub database: String,
    pub selection: String,
    pub generated: String,
    pub provenance: String,
}

/// The longest name of a file the report writes, in bytes (a file system takes 255; a name
/// stays short enough to read, copy and put beside a suffix).
pub const MAX_NAME: usize = 100;

/// The stem of the files an item with this id is written to: the id itself when it is at most
/// 90 bytes of letters, digits, '-' and '_'; otherwise its first safe characters and a hash of
/// the whole id, so that two ids never share a file (`MAX_NAME` with any suffix).
pub fn file_stem(id: &str) -> String {
    const MAX_STEM: usize = 90;
    let safe = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if !id.is_empty() && id.len() <= MAX_STEM && id.chars().all(safe) {
        return id.to_string();
    }
    // FNV-1a, 64 bits: stable across builds and platforms.
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
    let head: String = id.chars().map(|c| if safe(c) { c } else { '-' }).take(MAX_STEM - 17).collect();
    let head = head.trim_matches('-');
    if head.is_empty() {
        format!("{hash:016x}")
    } else {
        format!("{head}-{hash:016x}")
    }
}

/// The file names a figure and a table are also written to, relative to the report.
pub(crate) fn figure_file(id: &str) -> String {
    format!("figures/{}.svg", file_stem(id))
}

pub(crate) fn table_files(id: &str) -> (String, String) {
    let stem = file_stem(id);
    (format!("tables/{stem}.csv"), format!("tables/{stem}.md"))
}

pub fn page(h: &Header, sections: &[Section], method_notes: &str) -> String {
    let mut s = format!("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{}</title><style>{STYLE}</style>{CATCH}</head><body>\n",
        esc(&h.title));
    s += &format!(
        "<h1>{}</h1><p class=\"meta\">Generated {} from <code>{}</code> · selection: {}</p><p class=\"meta\">{}</p>\n",
        esc(&h.title),
        esc(&h.generated),
        esc(&h.database),
        esc(&h.selection),
        esc(&h.provenance)
    );
    s += "<nav><h2>Figures and tables</h2><ol>";
    for sec in sections {
        for item in &sec.items {
            match item {
                Item::Figure(f) => {
                    s += &format!(
                        "<li><a href=\"#{}\">{}</a> <span class=\"files\">{}</span></li>",
                        esc(&f.id),
                        esc(&f.title),
                        esc(&sec.title)
                    )
                }
                Item::Table(t) => s += &format!("<li><a href=\"#{}\">Table: {}</a></li>", esc(&t.id), esc(&t.table.title)),
                Item::Note(_) => {}
            }
        }
    }
    s += "</ol></nav>\n";
    for sec in sections {
        s += &format!("<section id=\"{}\"><h2>{}</h2><p class=\"about\">{}</p>\n", esc(&sec.id), esc(&sec.title), esc(&sec.about));
        for item in &sec.items {
            match item {
                Item::Note(n) => s += &format!("<p class=\"callout\">{}</p>\n", esc(n)),
                Item::Figure(f) => {
                    s += &format!("<figure class=\"fig\" id=\"{}\">{}<figcaption>", esc(&f.id), f.svg);
                    for n in &f.notes {
                        s += &format!("<p class=\"note\">{}</p>", esc(n));
                    }
                    s += &format!(
                        "<p class=\"prov\">{}</p><p class=\"files\">{}</p></figcaption></figure>\n",
                        esc(&f.provenance),
                        esc(&figure_file(&f.id))
                    );
                }
                Item::Table(t) => {
                    let (csv, md) = table_files(&t.id);
                    s += &format!(
                        "<div class=\"tbl\" id=\"{}\"><h3>{}</h3>{}<p class=\"prov\">{}</p><p class=\"files\">{} · {}</p></div>\n",
                        esc(&t.id),
                        esc(&t.table.title),
                        t.table.html(),
                        esc(&t.provenance),
                        esc(&csv),
                        esc(&md)
                    );
                }
            }
        }
        s += "</section>\n";
    }
    s += &format!("<section id=\"method\"><h2>How the numbers were made</h2>{method_notes}</section>\n");
    s += "<div id=\"readout\"></div>\n";
    s += CHECK;
    s += "</body></html>\n";
    s
}
