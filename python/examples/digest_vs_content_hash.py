"""What MLflow's own dataset digest detects, next to tablepin's content hash,
on the real Online Retail II table.

    python python/examples/digest_vs_content_hash.py ../shared/data/online_retail_II.csv.gz

Each case changes the table as history does (a late return lowers the
quantity of one old invoice line; a corrected invoice date; a removed line)
and says whether each fingerprint moved. Needs tablepin, pandas, pyarrow and
mlflow-skinny.
"""

import sys

import mlflow.data
import pandas as pd
import pyarrow.csv as pacsv

import tablepin


def fingerprints(df: pd.DataFrame) -> tuple[str, str]:
    return mlflow.data.from_pandas(df).digest, tablepin.content_hash(df)


def main(path: str) -> None:
    df = pacsv.read_csv(path).to_pandas()
    print(f"{len(df):,} invoice lines, columns: {', '.join(df.columns)}")
    base = fingerprints(df)
    row = len(df) // 2  # an old line far past the first 10,000 rows

    late_return = df.copy()
    late_return.loc[row, "Quantity"] = late_return.loc[row, "Quantity"] - 1
    date_fix = df.copy()
    date_fix.loc[row, "InvoiceDate"] = date_fix.loc[row, "InvoiceDate"] + pd.Timedelta(days=1)
    early_return = df.copy()
    early_return.loc[5, "Quantity"] = early_return.loc[5, "Quantity"] - 1
    removed = df.drop(index=row).reset_index(drop=True)
    reordered = df.sample(frac=1.0, random_state=1).reset_index(drop=True)

    print("| change | MLflow digest moved | content hash moved |")
    print("|---|---|---|")
    for name, changed in [
        (f"late return: Quantity - 1 on line {row:,}", late_return),
        (f"InvoiceDate + 1 day on line {row:,}", date_fix),
        ("Quantity - 1 on line 5", early_return),
        (f"line {row:,} removed", removed),
        ("same rows, shuffled", reordered),
    ]:
        d, h = fingerprints(changed)
        print(f"| {name} | {'yes' if d != base[0] else 'NO'} | {'yes' if h != base[1] else 'no'} |")


if __name__ == "__main__":
    main(sys.argv[1])
