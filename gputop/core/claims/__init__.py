"""Claims: who may use which card on a shared server without a scheduler (docs/claims.md)."""
