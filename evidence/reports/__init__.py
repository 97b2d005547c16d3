"""Renderers: Jinja2 templates fed with data from the analyst; no analysis lives here."""
