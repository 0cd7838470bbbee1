#!/bin/sh
# Remakes the generated part of the corpus from the sources in this folder
# (LibreOffice 7.4, Debian's libreoffice-*-nogui; fonts-wqy-microhei for the
# Chinese text). The debian-*.pdf files are copied from Debian packages:
# libtasn1-doc (libtasn1.pdf), shared-mime-info (shared-mime-info-spec.pdf),
# libreoffice-core (xpdfimport_err.pdf).
set -eu
cd "$(dirname "$0")"
out=..
tmp=$(mktemp -d)
cp report.html columns.fodt deck.fodp sales.csv "$tmp"
cd "$tmp"
soffice --headless --convert-to odt report.html
soffice --headless --convert-to pdf report.odt
soffice --headless --convert-to docx report.odt
for t in pdf docx odt; do soffice --headless --convert-to $t columns.fodt; done
for t in xlsx ods; do soffice --headless --convert-to $t --infilter=CSV:44,34,76 sales.csv; done
for t in pptx odp pdf; do soffice --headless --convert-to $t deck.fodp; done
cp columns.fodt secret.fodt
soffice --headless --convert-to 'pdf:writer_pdf_Export:{"EncryptFile":{"type":"boolean","value":"true"},"DocumentOpenPassword":{"type":"string","value":"secret"}}' secret.fodt
mv secret.pdf encrypted.pdf
cp report.pdf report.docx report.odt columns.pdf columns.docx columns.odt sales.xlsx sales.ods deck.pptx deck.odp deck.pdf encrypted.pdf "$OLDPWD/$out/"
