//! What a rule may be: the size of its file, and the size and shape of each of its CEL
//! expressions (condition, evidence, each `{{ }}` placeholder).
//!
//! The CEL parser and interpreter recurse once per nesting level of an expression, so an
//! expression's shape decides how much stack parsing and evaluating it takes. These limits
//! keep every expression `rules check` accepts well within [`super::EVAL_STACK_SIZE`], the
//! stack of every thread that evaluates rules (the agent's monitor, a diagnosis the API
//! runs, `rules check` itself). Before parsing, the source is scanned ([`scan`]) for its
//! bracket nesting and its number of operators (the parser recurses once per operator of a
//! chain like `a + b + c`); after parsing, the syntax tree's depth and size are checked.
//! `docs/rules.md` states them.

/// Largest rule file, in bytes: a rule is a few KiB of TOML.
pub const MAX_RULE_FILE: u64 = 64 * 1024;

/// Longest expression (condition, evidence, placeholder), in bytes.
pub const MAX_EXPRESSION_BYTES: usize = 4096;

/// Deepest nesting of brackets `(`, `[`, `{` in an expression (calls and macros count:
/// `flows.exists(f, ...)` is one level).
pub const MAX_NESTING: usize = 24;

/// Most operators in an expression: arithmetic, comparison, logical, `in`, `?`, field
/// selections (`.`) and indexes (`[`).
pub const MAX_OPERATORS: usize = 256;

/// Deepest syntax tree of an expression, macros expanded (each link of a chain like
/// `a + b + c` is a level).
pub const MAX_DEPTH: usize = 128;

/// Most nodes in an expression's syntax tree, macros expanded.
pub const MAX_NODES: usize = 1024;

/// What [`scan`] finds in an expression's source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shape {
    /// Deepest bracket nesting.
    pub nesting: usize,
    /// Operators, field selections and indexes.
    pub operators: usize,
}

/// Checks `src` against the limits that hold before parsing; the error says which and what
/// to do.
pub fn check_source(src: &str) -> Result<(), String> {
    if src.len() > MAX_EXPRESSION_BYTES {
        return Err(format!(
            "the expression is {} bytes long, more than the {MAX_EXPRESSION_BYTES} an \
             expression may have: split it into several rules or evidence entries",
            src.len()
        ));
    }
    let shape = scan(src);
    if shape.nesting > MAX_NESTING {
        return Err(format!(
            "the expression nests brackets {} deep, more than the {MAX_NESTING} an expression \
             may: flatten it",
            shape.nesting
        ));
    }
    if shape.operators > MAX_OPERATORS {
        return Err(format!(
            "the expression has {} operators, more than the {MAX_OPERATORS} an expression may \
             have: split it into several rules, or use `x in [...]` for lists of values",
            shape.operators
        ));
    }
    Ok(())
}

/// Bracket nesting and operators of `src`, outside string literals and `//` comments. An
/// unterminated string or comment ends the scan (the parser then reports it).
pub fn scan(src: &str) -> Shape {
    let b = src.as_bytes();
    let mut shape = Shape::default();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |n| i + n);
                continue;
            }
            b'\'' | b'"' => {
                i = skip_string(b, i, false);
                continue;
            }
            b'0'..=b'9' => {
                i = skip_number(b, i);
                continue;
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let end = b[i..]
                    .iter()
                    .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
                    .map_or(b.len(), |n| i + n);
                let word = &src[i..end];
                let prefix = word.len() <= 2 && word.bytes().all(|c| b"rRbB".contains(&c));
                if prefix && matches!(b.get(end), Some(b'\'' | b'"')) {
                    i = skip_string(b, end, word.contains(['r', 'R']));
                    continue;
                }
                if word == "in" {
                    shape.operators += 1;
                }
                i = end;
                continue;
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                shape.nesting = shape.nesting.max(depth);
                if c == b'[' {
                    shape.operators += 1;
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'=' | b'!' | b'<' | b'>' | b'&' | b'|' => {
                shape.operators += 1;
                // Two-character operators count once: `==`, `!=`, `<=`, `>=`, `&&`, `||`.
                let pair = matches!(
                    (c, b.get(i + 1)),
                    (b'=' | b'!' | b'<' | b'>', Some(b'='))
                        | (b'&', Some(b'&'))
                        | (b'|', Some(b'|'))
                );
                i += if pair { 2 } else { 1 };
                continue;
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'?' | b'.' => shape.operators += 1,
            _ => {}
        }
        i += 1;
    }
    shape
}

/// The index just past the string literal whose opening quote is at `start`.
fn skip_string(b: &[u8], start: usize, raw: bool) -> usize {
    let quote = b[start];
    let triple = b.get(start + 1) == Some(&quote) && b.get(start + 2) == Some(&quote);
    let mut i = start + if triple { 3 } else { 1 };
    while i < b.len() {
        match b[i] {
            b'\\' if !raw => i += 2,
            c if c == quote => {
                if !triple {
                    return i + 1;
                }
                if b.get(i + 1) == Some(&quote) && b.get(i + 2) == Some(&quote) {
                    return i + 3;
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    b.len()
}

/// The index just past the number literal starting at `start`: digits, a hexadecimal
/// `0x...`, a fraction, an exponent with its sign, a `u` suffix. A sign is part of the number
/// only right after the exponent of a decimal, so `0xe+1` is two numbers and an operator.
fn skip_number(b: &[u8], start: usize) -> usize {
    let hex = b[start] == b'0' && matches!(b.get(start + 1), Some(b'x' | b'X'));
    let mut i = start + if hex { 2 } else { 0 };
    while i < b.len() {
        let c = b[i];
        let exponent_sign = !hex
            && matches!(c, b'+' | b'-')
            && matches!(b.get(i.wrapping_sub(1)), Some(b'e' | b'E'));
        let fraction = !hex && c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit);
        if c.is_ascii_alphanumeric() || exponent_sign || fraction {
            i += 1;
        } else {
            break;
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(src: &str) -> (usize, usize) {
        let s = scan(src);
        (s.nesting, s.operators)
    }

    #[test]
    fn counts_operators_and_nesting_outside_strings_and_comments() {
        assert_eq!(shape("1 + 2 * 3"), (0, 2));
        assert_eq!(shape("a.b.c == 1 && !x || y in [1, 2]"), (1, 8));
        assert_eq!(shape("f(g(h(1)))"), (3, 0));
        assert_eq!(shape("'((((' + \"[[\" + '''a ' (( ''' + r'\\' + 1"), (0, 4));
        assert_eq!(shape("1 // ((((( + + +\n + 2"), (0, 1));
        assert_eq!(shape("'it\\'s (' + b\"x\" + rb'y'"), (0, 2));
        assert_eq!(shape("x <= 1 && y >= 2 && z != 3"), (0, 5));
        assert_eq!(shape("a ? b : c"), (0, 1));
    }

    #[test]
    fn numbers_hide_no_operator() {
        assert_eq!(shape("1.5 + 2e-3 + 0x1F + 3u"), (0, 3));
        // Hexadecimal digits include `e`: the sign after one is an operator.
        assert_eq!(shape("0xe+0xe+0xe"), (0, 2));
        assert_eq!(shape("1e+5+1"), (0, 1));
        assert_eq!(shape("[1][0].size()"), (1, 3));
        assert_eq!(shape("[[1]].size()"), (2, 3));
    }

    #[test]
    fn unterminated_literals_end_the_scan() {
        assert_eq!(shape("'abc + ("), (0, 0));
        assert_eq!(shape("1 + '''abc'' + ("), (0, 1));
    }

    #[test]
    fn source_checks_name_the_limit() {
        let long = format!("{}1", "1 + ".repeat(1500));
        assert!(check_source(&long)
            .expect_err("refused")
            .contains("bytes long"));
        let ops = format!("{}1", "1+".repeat(MAX_OPERATORS + 1));
        assert!(check_source(&ops)
            .expect_err("refused")
            .contains("operators"));
        let ok = format!("{}1", "1+".repeat(MAX_OPERATORS));
        assert_eq!(check_source(&ok), Ok(()));
        let deep = format!(
            "{}1{}",
            "(".repeat(MAX_NESTING + 1),
            ")".repeat(MAX_NESTING + 1)
        );
        assert!(check_source(&deep)
            .expect_err("refused")
            .contains("nests brackets"));
        let fits = format!("{}1{}", "(".repeat(MAX_NESTING), ")".repeat(MAX_NESTING));
        assert_eq!(check_source(&fits), Ok(()));
    }
}
