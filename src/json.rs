//! JSON values compared as a JavaScript client and a model see them: `50.0`
//! and `50` are one number.

use serde_json::Value;

/// Whether two JSON values are the same: numbers by value (integers exactly,
/// a float equal to an integer only where both are exact), objects whatever
/// their key order.
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i128(), y.as_i128()) {
            (Some(x), Some(y)) => x == y,
            (Some(int), None) => int_equals_float(int, y.as_f64()),
            (None, Some(int)) => int_equals_float(int, x.as_f64()),
            (None, None) => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        (a, b) => a == b,
    }
}

/// Only integers up to 2^53 are exact as floats.
fn int_equals_float(int: i128, float: Option<f64>) -> bool {
    const EXACT: i128 = 1 << 53;
    int.abs() <= EXACT && float.is_some_and(|f| f == int as f64)
}
