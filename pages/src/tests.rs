use super::*;

/// The WCAG 2 contrast ratio of two `#rrggbb` colours.
fn contrast(a: &str, b: &str) -> f64 {
    let luminance = |hex: &str| {
        let channel = |i: usize| {
            let c = u8::from_str_radix(&hex[1 + 2 * i..3 + 2 * i], 16).unwrap() as f64 / 255.0;
            if c <= 0.03928 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2)
    };
    let (x, y) = (luminance(a), luminance(b));
    (x.max(y) + 0.05) / (x.min(y) + 0.05)
}

#[test]
fn text_colours_keep_wcag_aa_contrast_on_every_background() {
    let base = TEMPLATES.iter().find(|(n, _)| *n == "base.html").unwrap().1;
    let root = &base[base.find(":root {").unwrap()..];
    let root = &root[..root.find('}').unwrap()];
    let colour = |name: &str| {
        let at = root.find(&format!("--{name}: ")).unwrap_or_else(|| panic!("--{name} in :root"));
        root[at + name.len() + 4..at + name.len() + 11].to_string()
    };
    for text in ["fg", "muted", "link", "accent", "warn"] {
        for background in ["bg", "band"] {
            let ratio = contrast(&colour(text), &colour(background));
            assert!(ratio >= 4.5, "--{text} on --{background}: {ratio:.2}:1, below 4.5:1");
        }
    }
    // The charts' own colours against white.
    for (name, colour) in [("line", "#0a56c2"), ("bars", "#1a7f37")] {
        assert!(contrast(colour, "#ffffff") >= 3.0, "{name}");
    }
    for (outcome, colour) in guard::OUTCOME_COLOURS {
        assert!(contrast(colour, "#ffffff") >= 3.0, "{outcome:?}");
    }
}

#[test]
fn numbers_and_counts_read_as_words() {
    for (n, expected) in [(0, "0"), (7, "7"), (999, "999"), (1000, "1,000"), (1234567, "1,234,567"), (-4200, "-4,200")]
    {
        assert_eq!(num(Value::from(n)), expected);
    }
    assert_eq!(num(Value::from("x")), "x");
    assert_eq!(count(Value::from(1), "token", None), "1 token");
    assert_eq!(count(Value::from(2000), "token", None), "2,000 tokens");
    assert_eq!(count(Value::from(0), "registry", Some("registries")), "0 registries");
}

#[test]
fn only_web_addresses_become_links() {
    for (url, link) in [
        ("https://example.org/a", true),
        ("http://example.org", true),
        ("javascript:alert(1)", false),
        ("data:text/html,x", false),
        ("//evil.example", false),
        ("HTTPS://example.org", false),
    ] {
        assert_eq!(web(url), link, "{url}");
    }
}

#[test]
fn text_from_the_data_is_escaped_and_markup_made_here_is_not() {
    let renderer = Renderer::new(false, false);
    let hostile = "<script>alert('x')</script> & \"/\"";
    let page = Page {
        route: "/accounts/x".into(),
        file: "accounts/x.html".into(),
        template: "account.html",
        context: context! { account => hostile, balances => context! { count => 0 }, rows => Vec::<Value>::new() },
        json: Some("/hcs20/account/x".into()),
        last_modified: Timestamp(0),
        cache: Cache::Balances,
        made: Made::Build,
    };
    let file = renderer.finish(page).unwrap();
    let html = String::from_utf8(file.representation.body).unwrap();
    assert!(!html.contains("<script>"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;/&quot;"), "{html}");
    // Paths stay readable: `/` is not an entity.
    assert!(html.contains("href=\"/hcs20/account/x\""), "{html}");
    assert_eq!(file.representation.content_type, HTML);
    let env = environment();
    let template = env.template_from_named_str("chart.html", "{{ chart }} {{ text }}").unwrap();
    let chart = markup(svg::bars(&[1], 10, 10, "a"));
    let rendered = template.render(context! { chart, text => "<svg>" }).unwrap();
    assert!(rendered.starts_with("<svg ") && rendered.ends_with(" &lt;svg&gt;"), "{rendered}");
}

#[test]
fn every_template_renders_its_frame() {
    let env = environment();
    for (name, _) in TEMPLATES {
        assert!(env.get_template(name).is_ok(), "{name}");
    }
}
