//! Money as people read it, in one place: every price is shown per month, every amount at
//! the currency's precision, the same for every cloud behind a provider. The API keeps the
//! exact values (`--json` shows them); only what is printed for people is rounded.

use std::str::FromStr;

use orc_zone_api_types::views::MoneyView;
use orc_zone_model::pricing::HOURS_PER_MONTH;
use rust_decimal::{Decimal, RoundingStrategy};

/// Decimals people see for `currency` (ISO 4217 minor units; 2 unless known otherwise).
fn decimals(currency: &str) -> u32 {
    match currency {
        "JPY" | "KRW" | "ISK" | "CLP" => 0,
        "BHD" | "KWD" | "OMR" | "JOD" | "TND" => 3,
        _ => 2,
    }
}

/// `amount` of `currency`, rounded half away from zero to its precision, with exactly that
/// many decimals; text that is no number is shown as it came.
pub fn amount(amount: &str, currency: &str) -> String {
    match Decimal::from_str(amount.trim()) {
        Ok(value) => round(value, currency),
        Err(_) => amount.to_string(),
    }
}

fn round(value: Decimal, currency: &str) -> String {
    let dp = decimals(currency);
    let rounded = value.round_dp_with_strategy(dp, RoundingStrategy::MidpointAwayFromZero);
    format!("{rounded:.*}", dp as usize)
}

/// A price as people read it: per month (an hourly rate times 730 hours), at the currency's
/// precision: `8.11 USD/month`.
pub fn price(money: &MoneyView) -> String {
    let Ok(value) = Decimal::from_str(money.amount.trim()) else {
        return format!("{} {}/{}", money.amount, money.currency, money.period);
    };
    let monthly = match money.period.as_str() {
        "hour" => value * HOURS_PER_MONTH,
        _ => value,
    };
    format!(
        "{} {}/month",
        round(monthly, &money.currency),
        money.currency
    )
}

/// Hours at two decimals.
pub fn hours(hours: &str) -> String {
    match Decimal::from_str(hours.trim()) {
        Ok(value) => format!(
            "{:.2}",
            value.round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero)
        ),
        Err(_) => hours.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn money(amount: &str, currency: &str, period: &str) -> MoneyView {
        MoneyView {
            amount: amount.into(),
            currency: currency.into(),
            period: period.into(),
        }
    }

    #[test]
    fn prices_read_per_month_at_the_currency_precision_whatever_the_cloud() {
        // Vultr-like exact monthly and Hetzner-like hourly prices read the same way.
        assert_eq!(
            price(&money("8.11411020000000000000", "USD", "month")),
            "8.11 USD/month"
        );
        assert_eq!(
            price(&money("0.0111152194520547945205479452", "USD", "hour")),
            "8.11 USD/month"
        );
        assert_eq!(price(&money("0.0060", "EUR", "hour")), "4.38 EUR/month");
        assert_eq!(price(&money("5", "JPY", "month")), "5 JPY/month");
    }

    #[test]
    fn amounts_round_half_away_from_zero() {
        assert_eq!(amount("0.0948", "USD"), "0.09");
        assert_eq!(amount("0.125", "USD"), "0.13");
        assert_eq!(amount("12", "EUR"), "12.00");
        assert_eq!(amount("n/a", "EUR"), "n/a");
        assert_eq!(hours("12.3456"), "12.35");
    }
}
