//! Money is a decimal amount with a currency and a billing period; never a float.
//!
//! Arithmetic only combines amounts of the same currency and period, so a monthly EUR price
//! can never be added to an hourly USD one by accident.

use std::fmt;
use std::str::FromStr;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// An ISO 4217 currency code, upper case, three letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Currency([u8; 3]);

impl Currency {
    pub const USD: Currency = Currency(*b"USD");
    pub const EUR: Currency = Currency(*b"EUR");

    pub fn as_str(&self) -> &str {
        // The constructor only admits ASCII upper-case letters.
        std::str::from_utf8(&self.0).unwrap_or("???")
    }
}

impl FromStr for Currency {
    type Err = MoneyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = s.as_bytes();
        if bytes.len() == 3 && bytes.iter().all(u8::is_ascii_alphabetic) {
            let mut code = [0u8; 3];
            for (slot, b) in code.iter_mut().zip(bytes) {
                *slot = b.to_ascii_uppercase();
            }
            Ok(Currency(code))
        } else {
            Err(MoneyError::InvalidCurrency(s.to_string()))
        }
    }
}

impl TryFrom<String> for Currency {
    type Error = MoneyError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Currency> for String {
    fn from(c: Currency) -> String {
        c.as_str().to_string()
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The period an amount is charged for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Period {
    Hour,
    Month,
    /// A one-off amount (a balance, a payment).
    Once,
}

impl fmt::Display for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Period::Hour => "hour",
            Period::Month => "month",
            Period::Once => "once",
        })
    }
}

/// A decimal amount of one currency over one period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Money {
    pub amount: Decimal,
    pub currency: Currency,
    pub period: Period,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    #[error("{0:?} is not a three-letter currency code")]
    InvalidCurrency(String),
    #[error("cannot combine {left} with {right}")]
    Mismatch { left: String, right: String },
    #[error("amount overflows")]
    Overflow,
}

impl Money {
    pub fn new(amount: Decimal, currency: Currency, period: Period) -> Self {
        Money {
            amount,
            currency,
            period,
        }
    }

    pub fn usd_per_month(amount: Decimal) -> Self {
        Money::new(amount, Currency::USD, Period::Month)
    }

    pub fn zero(currency: Currency, period: Period) -> Self {
        Money::new(Decimal::ZERO, currency, period)
    }

    /// Adds two amounts of the same currency and period.
    pub fn checked_add(self, other: Money) -> Result<Money, MoneyError> {
        self.same_unit(&other)?;
        let amount = self
            .amount
            .checked_add(other.amount)
            .ok_or(MoneyError::Overflow)?;
        Ok(Money { amount, ..self })
    }

    /// Multiplies by a plain factor (a quantity, a markup, an exchange rate).
    pub fn checked_mul(self, factor: Decimal) -> Result<Money, MoneyError> {
        let amount = self
            .amount
            .checked_mul(factor)
            .ok_or(MoneyError::Overflow)?;
        Ok(Money { amount, ..self })
    }

    /// Converts into another currency at `rate` units of `to` per unit of this currency.
    pub fn convert(self, to: Currency, rate: Decimal) -> Result<Money, MoneyError> {
        let amount = self.amount.checked_mul(rate).ok_or(MoneyError::Overflow)?;
        Ok(Money {
            amount,
            currency: to,
            period: self.period,
        })
    }

    fn same_unit(&self, other: &Money) -> Result<(), MoneyError> {
        if self.currency == other.currency && self.period == other.period {
            Ok(())
        } else {
            Err(MoneyError::Mismatch {
                left: self.unit(),
                right: other.unit(),
            })
        }
    }

    fn unit(&self) -> String {
        format!("{}/{}", self.currency, self.period)
    }
}

impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let amount = self.amount.normalize();
        match self.period {
            Period::Once => write!(f, "{amount} {}", self.currency),
            period => write!(f, "{amount} {}/{period}", self.currency),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::dec;

    #[test]
    fn adds_same_unit_and_refuses_mixed_units() {
        let a = Money::usd_per_month(dec!(5.49));
        let b = Money::usd_per_month(dec!(0.50));
        assert_eq!(a.checked_add(b).unwrap().amount, dec!(5.99));
        let hourly = Money::new(dec!(1), Currency::USD, Period::Hour);
        assert_eq!(
            a.checked_add(hourly).unwrap_err().to_string(),
            "cannot combine USD/month with USD/hour"
        );
    }

    #[test]
    fn converts_and_displays() {
        let eur = Money::new(dec!(5.49), Currency::EUR, Period::Month);
        let usd = eur.convert(Currency::USD, dec!(1.10)).unwrap();
        assert_eq!(usd.to_string(), "6.039 USD/month");
    }

    #[test]
    fn currency_parses_and_rejects() {
        assert_eq!("eur".parse::<Currency>().unwrap(), Currency::EUR);
        assert!("EURO".parse::<Currency>().is_err());
        assert!("E1R".parse::<Currency>().is_err());
        let json = serde_json::to_string(&Currency::USD).unwrap();
        assert_eq!(json, "\"USD\"");
    }
}
