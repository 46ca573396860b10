//! The embedded font. plotters' `ab_glyph` text support never looks at system
//! fonts, so the font every chart uses is registered here, once per process.

use std::sync::OnceLock;

use plotters::style::{register_font, FontStyle};

use crate::FigureError;

/// DejaVu Sans 2.37 (Bitstream Vera license, see fonts/DejaVuSans-LICENSE.txt).
static DEJAVU_SANS: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

/// Registered under plotters' generic sans-serif family so that any text style
/// plotters falls back to by default also finds it.
pub(crate) const FAMILY: &str = "sans-serif";

pub(crate) fn ensure_registered() -> Result<(), FigureError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok =
        *REGISTERED.get_or_init(|| register_font(FAMILY, FontStyle::Normal, DEJAVU_SANS).is_ok());
    if ok {
        Ok(())
    } else {
        Err(FigureError::Font)
    }
}
