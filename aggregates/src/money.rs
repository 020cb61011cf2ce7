//! Money as a whole number of a currency's minor units (cents, yen, fils),
//! never a float: budgets, costs and invoices add, split and compare
//! amounts exactly, and an amount that cannot be held is an error, not a
//! rounding.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// Why an amount or a currency could not be made.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MoneyError {
    #[error("{0:?} is not a currency code (three capital letters, ISO 4217)")]
    Currency(String),
    #[error("{text:?} is not an amount of {currency} (digits, at most {digits} after the point)")]
    Amount {
        text: String,
        currency: Currency,
        digits: u32,
    },
    #[error("{0} and {1} are different currencies")]
    Mixed(Currency, Currency),
    #[error("the amount is too large to hold")]
    Overflow,
    #[error("an amount is split into at least one part, with a positive total weight")]
    NoParts,
}

/// An ISO 4217 alphabetic code, such as `USD`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Currency([u8; 3]);

/// Codes whose minor unit is not a hundredth (ISO 4217's table).
const EXPONENTS: [(&str, u32); 26] = [
    ("BIF", 0),
    ("CLP", 0),
    ("DJF", 0),
    ("GNF", 0),
    ("ISK", 0),
    ("JPY", 0),
    ("KMF", 0),
    ("KRW", 0),
    ("PYG", 0),
    ("RWF", 0),
    ("UGX", 0),
    ("UYI", 0),
    ("VND", 0),
    ("VUV", 0),
    ("XAF", 0),
    ("XOF", 0),
    ("XPF", 0),
    ("BHD", 3),
    ("IQD", 3),
    ("JOD", 3),
    ("KWD", 3),
    ("LYD", 3),
    ("OMR", 3),
    ("TND", 3),
    ("CLF", 4),
    ("UYW", 4),
];

impl Currency {
    pub fn parse(code: &str) -> Result<Self, MoneyError> {
        match code.as_bytes() {
            [a, b, c] if [a, b, c].iter().all(|x| x.is_ascii_uppercase()) => Ok(Self([*a, *b, *c])),
            _ => Err(MoneyError::Currency(code.to_owned())),
        }
    }

    pub fn code(&self) -> &str {
        // Built only from ASCII capitals.
        std::str::from_utf8(&self.0).unwrap_or("XXX")
    }

    /// Digits after the point in a major amount: 2 for most, 0 for JPY, 3 for KWD.
    pub fn exponent(self) -> u32 {
        EXPONENTS
            .iter()
            .find(|(code, _)| *code == self.code())
            .map_or(2, |(_, e)| *e)
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl fmt::Debug for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Currency({})", self.code())
    }
}

impl FromStr for Currency {
    type Err = MoneyError;
    fn from_str(code: &str) -> Result<Self, MoneyError> {
        Self::parse(code)
    }
}

impl Serialize for Currency {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.code())
    }
}

impl<'de> Deserialize<'de> for Currency {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let code = String::deserialize(d)?;
        Self::parse(&code).map_err(serde::de::Error::custom)
    }
}

/// An amount: `minor` units of `currency` (USD 12.34 is 1234).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Money {
    minor: i64,
    currency: Currency,
}

impl Money {
    pub fn from_minor(minor: i64, currency: Currency) -> Self {
        Self { minor, currency }
    }

    pub fn zero(currency: Currency) -> Self {
        Self::from_minor(0, currency)
    }

    /// A decimal amount as people write it (`12.34`, `-0.5`, `7`), with no
    /// more digits after the point than the currency has: never rounded.
    pub fn parse(text: &str, currency: Currency) -> Result<Self, MoneyError> {
        let digits = currency.exponent();
        let bad = || MoneyError::Amount {
            text: text.to_owned(),
            currency,
            digits,
        };
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty()
            || !all_digits(whole)
            || !all_digits(fraction)
            || unsigned.ends_with('.')
            || fraction.len() > digits as usize
        {
            return Err(bad());
        }
        let scale = 10_i64.checked_pow(digits).ok_or(MoneyError::Overflow)?;
        let whole: i64 = whole.parse().map_err(|_| MoneyError::Overflow)?;
        let padded = format!("{fraction:0<width$}", width = digits as usize);
        let fraction: i64 = if padded.is_empty() {
            0
        } else {
            padded.parse().map_err(|_| bad())?
        };
        let minor = whole
            .checked_mul(scale)
            .and_then(|m| m.checked_add(fraction))
            .ok_or(MoneyError::Overflow)?;
        Ok(Self::from_minor(
            if negative { -minor } else { minor },
            currency,
        ))
    }

    pub fn minor(self) -> i64 {
        self.minor
    }

    pub fn currency(self) -> Currency {
        self.currency
    }

    pub fn is_zero(self) -> bool {
        self.minor == 0
    }

    pub fn is_negative(self) -> bool {
        self.minor < 0
    }

    fn same(self, other: Money) -> Result<(), MoneyError> {
        if self.currency == other.currency {
            Ok(())
        } else {
            Err(MoneyError::Mixed(self.currency, other.currency))
        }
    }

    pub fn checked_add(self, other: Money) -> Result<Money, MoneyError> {
        self.same(other)?;
        let minor = self
            .minor
            .checked_add(other.minor)
            .ok_or(MoneyError::Overflow)?;
        Ok(Self::from_minor(minor, self.currency))
    }

    pub fn checked_sub(self, other: Money) -> Result<Money, MoneyError> {
        self.same(other)?;
        let minor = self
            .minor
            .checked_sub(other.minor)
            .ok_or(MoneyError::Overflow)?;
        Ok(Self::from_minor(minor, self.currency))
    }

    /// This amount `times` times (a unit price by a quantity).
    pub fn checked_mul(self, times: i64) -> Result<Money, MoneyError> {
        let minor = self.minor.checked_mul(times).ok_or(MoneyError::Overflow)?;
        Ok(Self::from_minor(minor, self.currency))
    }

    /// Whether this is more than `other` (an error across currencies).
    pub fn exceeds(self, other: Money) -> Result<bool, MoneyError> {
        self.same(other)?;
        Ok(self.minor > other.minor)
    }

    /// Splits the amount by `weights` so that the parts add up to it
    /// exactly: each part gets its share rounded down, and the units left
    /// over go one each to the parts with the largest remainders (earlier
    /// parts first on a tie).
    pub fn allocate(self, weights: &[u32]) -> Result<Vec<Money>, MoneyError> {
        let total: i128 = weights.iter().map(|w| i128::from(*w)).sum();
        if total == 0 {
            return Err(MoneyError::NoParts);
        }
        let amount = i128::from(self.minor);
        let mut parts: Vec<i128> = Vec::with_capacity(weights.len());
        let mut remainders: Vec<(i128, usize)> = Vec::with_capacity(weights.len());
        for (i, w) in weights.iter().enumerate() {
            let share = amount * i128::from(*w);
            parts.push(share.div_euclid(total));
            remainders.push((share.rem_euclid(total), i));
        }
        let left = amount - parts.iter().sum::<i128>();
        remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, i) in remainders.iter().take(usize::try_from(left).unwrap_or(0)) {
            parts[*i] += 1;
        }
        parts
            .into_iter()
            .map(|p| {
                i64::try_from(p)
                    .map(|minor| Self::from_minor(minor, self.currency))
                    .map_err(|_| MoneyError::Overflow)
            })
            .collect()
    }
}

impl fmt::Display for Money {
    /// `12.34 USD`, `-0.05 EUR`, `500 JPY`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.currency.exponent();
        let sign = if self.minor < 0 { "-" } else { "" };
        let magnitude = self.minor.unsigned_abs();
        let scale = 10_u64.pow(digits);
        if digits == 0 {
            write!(f, "{sign}{magnitude} {}", self.currency)
        } else {
            let (whole, fraction) = (magnitude / scale, magnitude % scale);
            let width = digits as usize;
            write!(f, "{sign}{whole}.{fraction:0width$} {}", self.currency)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(code: &str) -> Currency {
        Currency::parse(code).unwrap()
    }

    fn m(text: &str, code: &str) -> Money {
        Money::parse(text, c(code)).unwrap()
    }

    #[test]
    fn currencies_are_three_capitals_with_their_exponent() {
        assert_eq!(c("USD").exponent(), 2);
        assert_eq!(c("JPY").exponent(), 0);
        assert_eq!(c("KWD").exponent(), 3);
        assert_eq!(c("CLF").exponent(), 4);
        for bad in ["usd", "US", "USDD", "U$D", ""] {
            assert!(Currency::parse(bad).is_err(), "{bad}");
        }
        let json = serde_json::to_string(&m("12.34", "EUR")).unwrap();
        assert_eq!(json, r#"{"minor":1234,"currency":"EUR"}"#);
        let back: Money = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m("12.34", "EUR"));
        assert!(serde_json::from_str::<Money>(r#"{"minor":1,"currency":"eur"}"#).is_err());
    }

    #[test]
    fn amounts_parse_exactly_and_print_back() {
        assert_eq!(m("12.34", "USD").minor(), 1234);
        assert_eq!(m("12.3", "USD").minor(), 1230);
        assert_eq!(m("7", "USD").minor(), 700);
        assert_eq!(m("-0.05", "USD").minor(), -5);
        assert_eq!(m("500", "JPY").minor(), 500);
        assert_eq!(m("1.005", "KWD").minor(), 1005);
        for (text, code) in [
            ("12.34", "USD"),
            ("-0.05", "EUR"),
            ("500", "JPY"),
            ("1.005", "KWD"),
        ] {
            let printed = m(text, code).to_string();
            assert_eq!(printed, format!("{text} {code}"));
        }
        for bad in [
            "1.234", "", ".5", "5.", "1,5", "1e3", "+1", "--1", "0x10", " 1",
        ] {
            assert!(Money::parse(bad, c("USD")).is_err(), "{bad:?}");
        }
        assert!(
            Money::parse("1.5", c("JPY")).is_err(),
            "no fraction of a yen"
        );
        assert_eq!(
            Money::parse("99999999999999999999", c("USD")),
            Err(MoneyError::Overflow)
        );
    }

    #[test]
    fn arithmetic_is_checked_and_never_mixes_currencies() {
        let ten = m("10.00", "USD");
        assert_eq!(
            ten.checked_add(m("0.01", "USD")).unwrap(),
            m("10.01", "USD")
        );
        assert_eq!(
            ten.checked_sub(m("10.50", "USD")).unwrap(),
            m("-0.50", "USD")
        );
        assert_eq!(ten.checked_mul(3).unwrap(), m("30", "USD"));
        assert!(ten.exceeds(m("9.99", "USD")).unwrap());
        assert_eq!(
            ten.checked_add(m("1", "EUR")),
            Err(MoneyError::Mixed(c("USD"), c("EUR")))
        );
        let most = Money::from_minor(i64::MAX, c("USD"));
        assert_eq!(
            most.checked_add(m("0.01", "USD")),
            Err(MoneyError::Overflow)
        );
        assert_eq!(most.checked_mul(2), Err(MoneyError::Overflow));
    }

    #[test]
    fn allocation_adds_up_to_the_whole() {
        let parts = m("100.00", "USD").allocate(&[1, 1, 1]).unwrap();
        let minors: Vec<i64> = parts.iter().map(|p| p.minor()).collect();
        assert_eq!(minors, [3334, 3333, 3333]);
        let parts = m("-0.05", "EUR").allocate(&[1, 1]).unwrap();
        let minors: Vec<i64> = parts.iter().map(|p| p.minor()).collect();
        assert_eq!(minors.iter().sum::<i64>(), -5);
        for (amount, weights) in [
            (1_i64, vec![7_u32, 3]),
            (999, vec![1, 2, 3, 4]),
            (-17, vec![5, 0, 5]),
        ] {
            let parts = Money::from_minor(amount, c("USD"))
                .allocate(&weights)
                .unwrap();
            assert_eq!(parts.iter().map(|p| p.minor()).sum::<i64>(), amount);
            assert_eq!(parts.len(), weights.len());
        }
        assert_eq!(m("1", "USD").allocate(&[]), Err(MoneyError::NoParts));
        assert_eq!(m("1", "USD").allocate(&[0, 0]), Err(MoneyError::NoParts));
    }

    proptest::proptest! {
        #[test]
        fn any_split_adds_up_and_any_amount_prints_and_parses_back(
            minor in -1_000_000_000_000_i64..1_000_000_000_000,
            weights in proptest::collection::vec(0_u32..1000, 1..8),
            code in proptest::sample::select(vec!["USD", "JPY", "KWD", "CLF"]),
        ) {
            let amount = Money::from_minor(minor, c(code));
            if weights.iter().any(|w| *w > 0) {
                let parts = amount.allocate(&weights).unwrap();
                proptest::prop_assert_eq!(parts.iter().map(|p| p.minor()).sum::<i64>(), minor);
                for (part, weight) in parts.iter().zip(&weights) {
                    if *weight == 0 {
                        proptest::prop_assert_eq!(part.minor(), 0);
                    }
                }
            }
            let printed = amount.to_string();
            let (number, currency) = printed.split_once(' ').unwrap();
            proptest::prop_assert_eq!(currency, code);
            proptest::prop_assert_eq!(Money::parse(number, c(code)).unwrap(), amount);
        }
    }
}
