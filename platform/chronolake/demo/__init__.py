"""The demo: a seeded lake of CDC orders and rates, and one run of the reference platform
over it (`chronolake demo`)."""
