//! A small self-contained HTML page: a title, then sections of paragraphs,
//! tables and inline SVG plots. Every command that writes `--html` builds
//! one of these.
//!
//! ```
//! use irqlab_report::html::{Page, Section, Table};
//! let html = Page::new("Analysis of set.toml")
//!     .intro("Response-time analysis, refined bound.")
//!     .section(
//!         Section::new("Tasks")
//!             .table(Table::new(["task", "R"]).row(["tau1", "2ms"]))
//!             .svg("<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>"),
//!     )
//!     .render()
//!     .unwrap();
//! assert!(html.contains("<td>tau1</td>"));
//! ```

use serde::Serialize;

/// A table: a header row and rows of cells (text, escaped on output).
/// Columns are right-aligned (numbers) except the first and those listed
/// in `text_columns` (sentences). A cell may be coloured by a [`Tone`]
/// (`tone_cell`: better or worse, ok or a problem).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub text_columns: Vec<usize>,
    /// Per row, the tone of each cell (`None`: plain); shorter than the
    /// row, or missing, where no cell is coloured.
    pub tones: Vec<Vec<Option<Tone>>>,
}

impl Table {
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Self {
        Table { headers: headers.into_iter().map(Into::into).collect(), rows: Vec::new(), text_columns: Vec::new(), tones: Vec::new() }
    }

    /// Aligns these columns (0-based) left, as text.
    pub fn text_columns(mut self, columns: impl IntoIterator<Item = usize>) -> Self {
        self.text_columns.extend(columns);
        self
    }

    pub fn row<S: Into<String>>(mut self, cells: impl IntoIterator<Item = S>) -> Self {
        self.rows.push(cells.into_iter().map(Into::into).collect());
        self
    }

    pub fn push_row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Colours cell `column` (0-based) of the last row pushed.
    pub fn tone_cell(&mut self, column: usize, tone: Tone) {
        let Some(row) = self.rows.len().checked_sub(1) else { return };
        self.tones.resize_with(self.rows.len(), Vec::new);
        let cells = &mut self.tones[row];
        if cells.len() <= column {
            cells.resize(column + 1, None);
        }
        cells[column] = Some(tone);
    }

    /// The table as terminal text: a line per row, indented two spaces,
    /// each column padded to its widest cell.
    pub fn to_text(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            // Padded by hand: `format!("{c:<w$}")` panics for widths over
            // u16::MAX (a 100 KB task name in a user's file).
            let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count()))).collect();
            format!("  {}\n", padded.join("  ").trim_end())
        };
        std::iter::once(&self.headers).chain(&self.rows).map(|r| line(r)).collect()
    }
}

/// One piece of a section, shown in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Block {
    /// Text, escaped.
    Paragraph {
        text: String,
    },
    /// Preformatted text (logs, commands), escaped.
    Pre {
        text: String,
    },
    Table {
        table: Table,
    },
    /// An SVG document (e.g. from [`crate::plot::LinePlot::to_svg`]),
    /// embedded as is. Only pass SVG that irqlab generated.
    Svg {
        svg: String,
    },
    /// An SVG plot (as [`Block::Svg`]) with a caption below it, escaped.
    Figure {
        svg: String,
        caption: String,
    },
    /// A coloured line that must not be missed (a verdict, a warning), escaped.
    Callout {
        tone: Tone,
        text: String,
    },
    /// A small heading inside the section, escaped.
    Subheading {
        text: String,
    },
    /// A command to copy, in a code block, escaped.
    Code {
        text: String,
    },
    /// A list of links (title, relative address), escaped.
    Links {
        links: Vec<Link>,
    },
}

/// How a [`Block::Callout`] is coloured, from good to bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tone {
    Ok,
    Note,
    Warn,
    Problem,
}

/// One entry of [`Block::Links`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    pub title: String,
    pub href: String,
}

/// A headed part of the page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Section {
    pub heading: String,
    pub blocks: Vec<Block>,
}

impl Section {
    pub fn new(heading: impl Into<String>) -> Self {
        Section { heading: heading.into(), blocks: Vec::new() }
    }

    pub fn paragraph(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(Block::Paragraph { text: text.into() });
        self
    }

    pub fn pre(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(Block::Pre { text: text.into() });
        self
    }

    pub fn table(mut self, table: Table) -> Self {
        self.blocks.push(Block::Table { table });
        self
    }

    pub fn svg(mut self, svg: impl Into<String>) -> Self {
        self.blocks.push(Block::Svg { svg: svg.into() });
        self
    }

    pub fn figure(mut self, svg: impl Into<String>, caption: impl Into<String>) -> Self {
        self.blocks.push(Block::Figure { svg: svg.into(), caption: caption.into() });
        self
    }

    pub fn callout(mut self, tone: Tone, text: impl Into<String>) -> Self {
        self.blocks.push(Block::Callout { tone, text: text.into() });
        self
    }

    pub fn subheading(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(Block::Subheading { text: text.into() });
        self
    }

    pub fn code(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(Block::Code { text: text.into() });
        self
    }

    /// Links as (title, address) pairs.
    pub fn links(mut self, links: &[(String, String)]) -> Self {
        let links = links.iter().map(|(title, href)| Link { title: title.clone(), href: href.clone() }).collect();
        self.blocks.push(Block::Links { links });
        self
    }

    /// Whether the section shows nothing but its heading.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
}

/// A whole HTML page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Page {
    pub title: String,
    pub intro: Option<String>,
    pub sections: Vec<Section>,
}

/// Rendering failed (a template error; should not happen).
#[derive(Debug, thiserror::Error)]
#[error("html: {0}")]
pub struct HtmlError(String);

const TEMPLATE: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
{#- Everything is inline: a browser refuses anything from elsewhere, and says so in its console. #}
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{{ page.title }}</title>
<style>
body { font-family: sans-serif; max-width: 70rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { border: 1px solid #bbb; padding: 0.25rem 0.6rem; text-align: right; }
th:first-child, td:first-child, th.text, td.text { text-align: left; }
td.ok { background: #e8f5e9; } td.note { background: #e3f2fd; } td.warn { background: #fff8e1; } td.problem { background: #ffebee; }
th { background: #eee; }
pre { background: #f5f5f5; padding: 0.5rem; overflow-x: auto; }
.plot svg { max-width: 100%; height: auto; }
figure.plot { display: inline-block; margin: 0.5rem 1rem 0.5rem 0; vertical-align: top; }
figcaption { font-size: 0.85rem; color: #555; max-width: 480px; }
.callout { padding: 0.5rem 0.8rem; border-left: 0.4rem solid; font-weight: bold; }
.callout.ok { background: #e8f5e9; border-color: #2e7d32; }
.callout.note { background: #e3f2fd; border-color: #1565c0; }
.callout.warn { background: #fff8e1; border-color: #ef8f00; }
.callout.problem { background: #ffebee; border-color: #c62828; }
pre code { user-select: all; }
</style>
</head>
<body>
<h1>{{ page.title }}</h1>
{% if page.intro %}<p>{{ page.intro }}</p>{% endif %}
{% for section in page.sections %}
<section>
<h2>{{ section.heading }}</h2>
{% for block in section.blocks %}
{% if block.type == "paragraph" %}<p>{{ block.text }}</p>
{% elif block.type == "pre" %}<pre>{{ block.text }}</pre>
{% elif block.type == "table" %}<table>
<tr>{% for h in block.table.headers %}<th{% if loop.index0 in block.table.text_columns %} class="text"{% endif %}>{{ h }}</th>{% endfor %}</tr>
{% for row in block.table.rows %}{% set tones = block.table.tones[loop.index0] if loop.index0 < block.table.tones|length else [] %}<tr>{% for cell in row %}{% set tone = tones[loop.index0] if loop.index0 < tones|length else none %}{% set classes = (["text"] if loop.index0 in block.table.text_columns else []) + ([tone] if tone else []) %}<td{% if classes %} class="{{ classes|join(" ") }}"{% endif %}>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table>
{% elif block.type == "svg" %}<div class="plot">{{ block.svg | safe }}</div>
{% elif block.type == "figure" %}<figure class="plot">{{ block.svg | safe }}<figcaption>{{ block.caption }}</figcaption></figure>
{% elif block.type == "callout" %}<p class="callout {{ block.tone }}">{{ block.text }}</p>
{% elif block.type == "subheading" %}<h3>{{ block.text }}</h3>
{% elif block.type == "code" %}<pre><code>{{ block.text }}</code></pre>
{% elif block.type == "links" %}<ul>{% for link in block.links %}<li><a href="{{ link.href }}">{{ link.title }}</a></li>{% endfor %}</ul>
{% endif %}
{% endfor %}
</section>
{% endfor %}
</body>
</html>
"#;

impl Page {
    pub fn new(title: impl Into<String>) -> Self {
        Page { title: title.into(), intro: None, sections: Vec::new() }
    }

    pub fn intro(mut self, text: impl Into<String>) -> Self {
        self.intro = Some(text.into());
        self
    }

    pub fn section(mut self, section: Section) -> Self {
        self.sections.push(section);
        self
    }

    /// The page as one HTML document (text escaped, SVG inline).
    pub fn render(&self) -> Result<String, HtmlError> {
        let mut env = minijinja::Environment::new();
        env.add_template("page.html", TEMPLATE).map_err(|e| HtmlError(e.to_string()))?;
        let template = env.get_template("page.html").map_err(|e| HtmlError(e.to_string()))?;
        template.render(minijinja::context! { page => self }).map_err(|e| HtmlError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_columns_line_up_on_the_widest_cell() {
        let t = Table::new(["task", "cpu"]).row(["tau1", "200.000"]).row(["ksoftirqd/0", "0"]);
        assert_eq!(t.to_text(), "  task         cpu\n  tau1         200.000\n  ksoftirqd/0  0\n");
    }

    #[test]
    fn a_cell_wider_than_u16_max_is_padded_not_a_panic() {
        let long = "9".repeat(70_000);
        let text = Table::new(["name", "x"]).row([long.as_str(), "1"]).row(["a", "2"]).to_text();
        assert!(text.lines().nth(2).unwrap().starts_with(&format!("  a{}  2", " ".repeat(69_999))));
    }

    #[test]
    fn escapes_text_and_embeds_svg() {
        let html = Page::new("a <b> & c")
            .section(
                Section::new("s")
                    .paragraph("x < y")
                    .pre("$ irqlab analyze")
                    .table(Table::new(["h"]).row(["<td>"]))
                    .svg("<svg><circle/></svg>"),
            )
            .render()
            .unwrap();
        assert!(html.contains("<title>a &lt;b&gt; &amp; c</title>"));
        assert!(html.contains("<p>x &lt; y</p>"));
        assert!(html.contains("<td>&lt;td&gt;</td>"));
        assert!(html.contains("<div class=\"plot\"><svg><circle/></svg></div>"));
        assert!(html.contains("<pre>$ irqlab analyze</pre>"));
    }

    #[test]
    fn figures_callouts_code_and_links() {
        let links = [("a <b>".to_string(), "sub/x.html".to_string())];
        let section = Section::new("s")
            .callout(Tone::Problem, "INCOMPLETE <now>")
            .subheading("h & h")
            .code("irqlab control threads 'napi:*'")
            .figure("<svg><circle/></svg>", "cap <1>")
            .links(&links);
        assert!(!section.is_empty() && Section::new("empty").is_empty());
        let html = Page::new("p").section(section).render().unwrap();
        assert!(html.contains("<p class=\"callout problem\">INCOMPLETE &lt;now&gt;</p>"), "{html}");
        assert!(html.contains("<h3>h &amp; h</h3>"));
        assert!(html.contains("<pre><code>irqlab control threads &#x27;napi:*&#x27;</code></pre>"), "{html}");
        assert!(html.contains("<figure class=\"plot\"><svg><circle/></svg><figcaption>cap &lt;1&gt;</figcaption></figure>"));
        assert!(html.contains("<a href=\"sub&#x2f;x.html\">a &lt;b&gt;</a>"), "{html}");
        assert!(html.contains("Content-Security-Policy"));
    }

    #[test]
    fn text_columns_are_marked() {
        let table = Table::new(["a", "b", "c"]).text_columns([2]).row(["1", "2", "three"]);
        let html = Page::new("p").section(Section::new("s").table(table)).render().unwrap();
        assert!(html.contains("<tr><th>a</th><th>b</th><th class=\"text\">c</th></tr>"), "{html}");
        assert!(html.contains("<tr><td>1</td><td>2</td><td class=\"text\">three</td></tr>"));
    }

    #[test]
    fn a_cell_can_be_toned() {
        let mut table = Table::new(["a", "b", "c"]).text_columns([2]);
        table.push_row(["1", "2", "three"]);
        table.tone_cell(1, Tone::Ok);
        table.tone_cell(2, Tone::Problem);
        table.push_row(["4", "5", "six"]);
        let html = Page::new("p").section(Section::new("s").table(table)).render().unwrap();
        assert!(html.contains("<tr><td>1</td><td class=\"ok\">2</td><td class=\"text problem\">three</td></tr>"), "{html}");
        assert!(html.contains("<tr><td>4</td><td>5</td><td class=\"text\">six</td></tr>"), "{html}");
        assert!(html.contains("td.ok {"));
        // Nothing to tone before the first row.
        Table::new(["a"]).tone_cell(0, Tone::Warn);
    }
}
