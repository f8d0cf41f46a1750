-- The customer export's filters, each served by an index the keyset pages can walk in id
-- order: with 5 M customers a 99-row prefix export used to scan the table for the count and
-- for every page.
CREATE INDEX customers_city_id ON customers (city, id);

--bun:split

CREATE INDEX customers_level_id ON customers (level, id);

--bun:split

-- LIKE 'prefix%' needs an operator class that compares bytes, whatever the collation.
CREATE INDEX customers_code_pattern ON customers (code text_pattern_ops);
