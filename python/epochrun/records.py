"""The JSON-lines files of a checkpoint directory (runs.jsonl, metrics.jsonl) as plain records,
and as pandas DataFrames when pandas is installed."""

import json


def read_jsonl(path):
    """One dict per line that parses as a JSON object; a torn or hand-edited line is skipped,
    as epochrun skips it. No file: no records."""
    records = []
    try:
        with open(path, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    records.append(record)
    except FileNotFoundError:
        pass
    return records


def to_frame(records, per_rank=False):
    """A DataFrame of `records`; with `per_rank`, one row per entry of each record's "ranks"
    list (metrics.jsonl: every rank's figures of one event), the event's fields beside the
    rank's, and a save's phases as columns "save_phases.<phase>"."""
    try:
        import pandas
    except ImportError as error:
        raise ImportError("a DataFrame needs pandas (pip install pandas, or apt install "
                          "python3-pandas); the records are plain lists of dicts without it") from error
    if not per_rank:
        return pandas.DataFrame.from_records(records)
    rows = []
    for record in records:
        event = {key: value for key, value in record.items() if key != "ranks"}
        for rank in record.get("ranks", []):
            rows.append({**event, **rank})
    return pandas.json_normalize(rows)
