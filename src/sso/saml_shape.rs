//! The shape a SAML response must have before its signature is even
//! looked at: the known attacks hide in the shape, not in the cryptography.
//!
//! - A document type declaration is refused (entity expansion, XXE).
//! - No signature at all is refused here, by name, before the check that
//!   every signature verifies; nor a SHA-1 signature or digest.
//! - Exactly one `Assertion`, in the clear: a second one is how signature
//!   wrapping smuggles an unsigned assertion beside a signed one.
//! - No comment inside the assertion: canonicalization drops comments, so
//!   `alice@acme.test<!---->.evil.test` is signed as one address and read
//!   as another by a parser that stops at the comment.

use quick_xml::Reader;
use quick_xml::events::Event;

/// Why a response's shape was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("not well-formed XML")]
    Malformed,
    #[error("a document type declaration is not allowed")]
    DocumentType,
    #[error("the response holds {0} assertions; exactly one is allowed (signature wrapping)")]
    AssertionCount(usize),
    #[error("encrypted assertions are not accepted")]
    Encrypted,
    #[error("the assertion holds an XML comment")]
    Comment,
    #[error("the response is unsigned")]
    Unsigned,
    #[error("the signature uses SHA-1, which can be forged")]
    WeakAlgorithm,
}

/// Refuses a response whose shape carries a known attack.
pub fn inspect(xml: &str) -> Result<(), ShapeError> {
    let mut reader = Reader::from_str(xml);
    let mut assertions = 0;
    let mut signatures = 0;
    // How deep inside an assertion the reader is (0: outside).
    let mut inside = 0usize;
    loop {
        let event = reader.read_event().map_err(|_| ShapeError::Malformed)?;
        match event {
            Event::DocType(_) => return Err(ShapeError::DocumentType),
            Event::Start(element) | Event::Empty(element)
                if element.local_name().as_ref() == b"EncryptedAssertion" =>
            {
                return Err(ShapeError::Encrypted);
            }
            Event::Start(element) | Event::Empty(element) if weak(&element) => {
                return Err(ShapeError::WeakAlgorithm);
            }
            Event::Start(element) => {
                let name = element.local_name();
                let assertion = name.as_ref() == b"Assertion";
                assertions += usize::from(assertion);
                signatures += usize::from(name.as_ref() == b"Signature");
                if assertion || inside > 0 {
                    inside += 1;
                }
            }
            Event::Empty(element) if element.local_name().as_ref() == b"Assertion" => {
                assertions += 1;
            }
            Event::End(_) if inside > 0 => inside -= 1,
            Event::Comment(_) if inside > 0 => return Err(ShapeError::Comment),
            Event::Eof => break,
            _ => {}
        }
    }
    if assertions != 1 {
        Err(ShapeError::AssertionCount(assertions))
    } else if signatures == 0 {
        Err(ShapeError::Unsigned)
    } else {
        Ok(())
    }
}

/// A `SignatureMethod` or `DigestMethod` naming SHA-1.
fn weak(element: &quick_xml::events::BytesStart<'_>) -> bool {
    matches!(
        element.local_name().as_ref(),
        b"SignatureMethod" | b"DigestMethod"
    ) && element
        .try_get_attribute("Algorithm")
        .ok()
        .flatten()
        .is_some_and(|algorithm| algorithm.value.ends_with(b"sha1"))
}

/// Refuses a document type declaration in any message we read.
pub fn no_document_type(xml: &str) -> Result<(), ShapeError> {
    let mut reader = Reader::from_str(xml);
    loop {
        match reader.read_event().map_err(|_| ShapeError::Malformed)? {
            Event::DocType(_) => return Err(ShapeError::DocumentType),
            Event::Eof => return Ok(()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"<?xml version="1.0"?><samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion"><!-- fine here --><saml:Assertion ID="a"><ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:SignatureValue>x</ds:SignatureValue></ds:Signature><saml:Subject><saml:NameID>alice@acme.test</saml:NameID></saml:Subject></saml:Assertion></samlp:Response>"#;

    #[test]
    fn one_clear_assertion_passes() {
        assert_eq!(inspect(ONE), Ok(()));
    }

    #[test]
    fn a_second_assertion_is_wrapping() {
        let wrapped = ONE.replace(
            "<saml:Assertion ID=\"a\">",
            "<saml:Assertion ID=\"evil\"><saml:Subject/></saml:Assertion><saml:Assertion ID=\"a\">",
        );
        assert_eq!(inspect(&wrapped), Err(ShapeError::AssertionCount(2)));
        // Hidden inside another element (an Object of a signature, say).
        let nested = ONE.replace(
            "<saml:Subject>",
            "<ds:Object xmlns:ds=\"x\"><saml:Assertion ID=\"b\"/></ds:Object><saml:Subject>",
        );
        assert_eq!(inspect(&nested), Err(ShapeError::AssertionCount(2)));
        let none = r#"<samlp:Response xmlns:samlp="p"/>"#;
        assert_eq!(inspect(none), Err(ShapeError::AssertionCount(0)));
    }

    #[test]
    fn a_response_without_a_signature_is_unsigned() {
        let start = ONE.find("<ds:Signature").unwrap();
        let end = ONE.find("</ds:Signature>").unwrap() + "</ds:Signature>".len();
        let unsigned = format!("{}{}", &ONE[..start], &ONE[end..]);
        assert_eq!(inspect(&unsigned), Err(ShapeError::Unsigned));
    }

    #[test]
    fn sha1_is_refused() {
        let sha1 = ONE.replace(
            "<ds:SignatureValue>",
            "<ds:SignedInfo><ds:SignatureMethod Algorithm=\"http://www.w3.org/2000/09/xmldsig#rsa-sha1\"/></ds:SignedInfo><ds:SignatureValue>",
        );
        assert_eq!(inspect(&sha1), Err(ShapeError::WeakAlgorithm));
    }

    #[test]
    fn a_comment_in_the_assertion_is_refused() {
        let commented = ONE.replace("alice@acme.test", "alice@acme.test<!---->.evil.test");
        assert_eq!(inspect(&commented), Err(ShapeError::Comment));
    }

    #[test]
    fn document_types_and_encryption_are_refused() {
        let doctype = ONE.replace(
            "<?xml version=\"1.0\"?>",
            "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY x \"y\">]>",
        );
        assert_eq!(inspect(&doctype), Err(ShapeError::DocumentType));
        let encrypted = ONE.replace("saml:Assertion", "saml:EncryptedAssertion");
        assert_eq!(inspect(&encrypted), Err(ShapeError::Encrypted));
        assert_eq!(inspect("<a><b></a>"), Err(ShapeError::Malformed));
    }
}
