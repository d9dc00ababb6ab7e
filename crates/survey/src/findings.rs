//! From measured numbers to findings and recommendations (pure).
