"""The Paper record shared by every part of the store."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Paper:
    id: str
    short_name: str
    headline: str
    abstract: str
    collection: str = ""
    year: int | None = None
    title: str | None = None
    url: str | None = None
    authors: list[str] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    code_urls: list[str] = field(default_factory=list)
    numbers: list[str] = field(default_factory=list)
    raw: str = ""

    @property
    def name(self) -> str:
        return self.short_name

    @property
    def display_title(self) -> str:
        """The real title when the source had one, else the headline."""
        return self.title or self.headline

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "name": self.short_name,
            "headline": self.headline,
            "title": self.title,
            "collection": self.collection,
            "year": self.year,
            "url": self.url,
            "authors": self.authors,
            "keywords": self.keywords,
            "code_urls": self.code_urls,
            "numbers": self.numbers,
            "abstract": self.abstract,
        }
