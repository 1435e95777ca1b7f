//! Resource URIs: each label a campaign holds is `oraculo://notes/<campaign>/<label>`, both
//! percent-encoded (a label has spaces, accents and colons: `Ficha: Odo`), so that any
//! client's URI parser reads it back unchanged.

/// Every resource URI starts with this.
pub const PREFIX: &str = "oraculo://notes/";
/// The template clients may fill in (RFC 6570 level 1: each part percent-encoded).
pub const TEMPLATE: &str = "oraculo://notes/{campaign}/{label}";

/// The URI of `label` in `campaign`.
pub fn source_uri(campaign: &str, label: &str) -> String {
    format!("{PREFIX}{}/{}", encode(campaign), encode(label))
}

/// The campaign and the label a URI names; `None` when it is not one of ours.
pub fn parse_source_uri(uri: &str) -> Option<(String, String)> {
    let rest = uri.strip_prefix(PREFIX)?;
    let (campaign, label) = rest.split_once('/')?;
    let (campaign, label) = (decode(campaign)?, decode(label)?);
    (!campaign.is_empty() && !label.trim().is_empty()).then_some((campaign, label))
}

/// Percent-encodes every byte but RFC 3986's unreserved characters.
fn encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// Decodes `%XX` escapes (either case); `None` on a broken escape or bytes that are not UTF-8.
/// Characters a client left unescaped pass as they are.
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = std::str::from_utf8(bytes.get(at + 1..at + 3)?).ok()?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            decoded.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

#[cfg(test)]
mod tests {
    use super::{parse_source_uri, source_uri};

    fn check(campaign: &str, label: &str, uri: &str) {
        assert_eq!(source_uri(campaign, label), uri);
        assert_eq!(parse_source_uri(uri), Some((campaign.to_string(), label.to_string())), "{uri}");
    }

    #[test]
    fn a_label_goes_there_and_back() {
        check("sample", "Sesión 9", "oraculo://notes/sample/Sesi%C3%B3n%209");
        check("sample", "Ficha: Odo", "oraculo://notes/sample/Ficha%3A%20Odo");
        check("Mi campaña", "Mundo: A/B", "oraculo://notes/Mi%20campa%C3%B1a/Mundo%3A%20A%2FB");
        // A client that lower-cases the escapes or leaves a space unescaped is still read.
        assert_eq!(
            parse_source_uri("oraculo://notes/sample/Sesi%c3%b3n 9"),
            Some(("sample".to_string(), "Sesión 9".to_string()))
        );
        for not_ours in [
            "file:///notes/a.md",
            "oraculo://notes/sample",
            "oraculo://notes/sample/",
            "oraculo://notes//Sesi%C3%B3n%209",
            "oraculo://notes/sample/%C3",
            "oraculo://notes/sample/%zz",
        ] {
            assert_eq!(parse_source_uri(not_ours), None, "{not_ours}");
        }
    }
}
