//! A small shell lexer: enough of POSIX shell syntax to find the simple
//! commands of a command line (words with quotes removed), which of them are
//! connected by pipes, and the text of command substitutions inside double quotes.

/// One simple command.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct SimpleCommand {
    /// Words with quoting removed; redirections and their targets excluded.
    pub words: Vec<String>,
    /// Its standard input is the previous command's output (`|`, `|&`).
    pub piped: bool,
}

/// The result of lexing a command line.
#[derive(Debug, Default)]
pub(crate) struct Lexed {
    /// The simple commands in order.
    pub commands: Vec<SimpleCommand>,
    /// `$(...)` and `` `...` `` bodies found inside double quotes, to analyze on their own.
    pub nested: Vec<String>,
}

struct Lexer {
    out: Lexed,
    cmd: SimpleCommand,
    word: Option<String>,
    /// The next word is a redirection target (dropped).
    redirect: bool,
}

impl Lexer {
    fn push_char(&mut self, c: char) {
        self.word.get_or_insert_with(String::new).push(c);
    }

    fn end_word(&mut self) {
        if let Some(w) = self.word.take() {
            if self.redirect {
                self.redirect = false;
            } else {
                self.cmd.words.push(w);
            }
        }
    }

    /// Ends the current command; the next one reads from a pipe if `piped`.
    fn end_command(&mut self, piped: bool) {
        self.end_word();
        self.redirect = false;
        let cmd = std::mem::take(&mut self.cmd);
        if !cmd.words.is_empty() {
            self.out.commands.push(cmd);
        }
        self.cmd.piped = piped;
    }
}

/// Lexes `text`. Never fails: unterminated quotes run to the end of the text.
pub(crate) fn lex(text: &str) -> Lexed {
    let chars: Vec<char> = text.chars().collect();
    let mut lx = Lexer {
        out: Lexed::default(),
        cmd: SimpleCommand::default(),
        word: None,
        redirect: false,
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '\\' => {
                match next {
                    Some('\n') | None => {}
                    Some(n) => lx.push_char(n),
                }
                i += 2;
                continue;
            }
            '\'' => {
                lx.word.get_or_insert_with(String::new);
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    lx.push_char(chars[i]);
                    i += 1;
                }
            }
            '"' => {
                lx.word.get_or_insert_with(String::new);
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    match chars[i] {
                        '\\' if matches!(chars.get(i + 1), Some('"' | '\\' | '$' | '`')) => {
                            lx.push_char(chars[i + 1]);
                            i += 1;
                        }
                        '$' if chars.get(i + 1) == Some(&'(') => {
                            let (body, end) = balanced(&chars, i + 2);
                            lx.out.nested.push(body);
                            i = end;
                        }
                        '`' => {
                            let end = (i + 1..chars.len())
                                .find(|&j| chars[j] == '`')
                                .unwrap_or(chars.len());
                            lx.out.nested.push(chars[i + 1..end].iter().collect());
                            i = end;
                        }
                        other => lx.push_char(other),
                    }
                    i += 1;
                }
            }
            '$' if next == Some('{') => {
                while i < chars.len() {
                    lx.push_char(chars[i]);
                    if chars[i] == '}' {
                        break;
                    }
                    i += 1;
                }
            }
            '$' if next == Some('(') => {
                lx.end_command(false);
                i += 1;
            }
            c if c.is_whitespace() && c != '\n' => lx.end_word(),
            ';' | '\n' | '(' | ')' | '`' => lx.end_command(false),
            '{' | '}'
                if lx.word.is_none() && next.is_none_or(|n| n.is_whitespace() || n == ';') =>
            {
                lx.end_command(false)
            }
            '#' if lx.word.is_none() => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '|' => {
                if next == Some('|') {
                    lx.end_command(false);
                    i += 1;
                } else {
                    lx.end_command(true);
                    if next == Some('&') {
                        i += 1;
                    }
                }
            }
            '&' if next == Some('>') => {
                lx.end_word();
                while matches!(chars.get(i + 1), Some('>')) {
                    i += 1;
                }
                lx.redirect = true;
            }
            '&' => {
                lx.end_command(false);
                if next == Some('&') {
                    i += 1;
                }
            }
            '<' if next == Some('(') => {
                lx.end_command(false);
                i += 1;
            }
            '>' | '<' => {
                // A file-descriptor number before the operator is not a word.
                if lx
                    .word
                    .as_deref()
                    .is_some_and(|w| w.chars().all(|d| d.is_ascii_digit()))
                {
                    lx.word = None;
                }
                lx.end_word();
                while matches!(chars.get(i + 1), Some('>' | '<' | '&' | '|')) {
                    i += 1;
                }
                // `2>&1`: the target is a descriptor, not a file; dropping it is harmless.
                lx.redirect = true;
            }
            other => lx.push_char(other),
        }
        i += 1;
    }
    lx.end_command(false);
    lx.out
}

/// The text from `start` up to the `)` that balances an already-open `(`, and
/// the index of that `)` (or the end).
fn balanced(chars: &[char], start: usize) -> (String, usize) {
    let mut depth = 1usize;
    let mut j = start;
    while j < chars.len() {
        match chars[j] {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
        j += 1;
    }
    (chars[start..j.min(chars.len())].iter().collect(), j)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<Vec<String>> {
        lex(text).commands.into_iter().map(|c| c.words).collect()
    }

    #[test]
    fn quotes_operators_and_pipes() {
        assert_eq!(words("rm -rf \"/\""), [["rm", "-rf", "/"]]);
        assert_eq!(words("sh -c 'rm -rf /'"), [["sh", "-c", "rm -rf /"]]);
        assert_eq!(words("a && b; c || d"), [["a"], ["b"], ["c"], ["d"]]);
        assert_eq!(words("echo hi > /dev/null 2>&1"), [["echo", "hi"]]);
        assert_eq!(words("echo ${HOME}/x"), [["echo", "${HOME}/x"]]);
        let l = lex("curl x | sudo sh");
        assert!(!l.commands[0].piped && l.commands[1].piped);
        assert_eq!(lex("echo \"$(rm -rf /)\"").nested, ["rm -rf /"]);
    }
}
