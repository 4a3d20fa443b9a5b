"""The support-policy knowledge base of the sample data: versioned documents written one fact per sentence."""

from __future__ import annotations

from dataclasses import dataclass

CORPUS_VERSION = "kb-2026-03"


@dataclass(frozen=True)
class Doc:
    """One version of one document; its text is its sentences joined by spaces."""

    doc_id: str
    topic: str
    sentences: tuple[str, ...]
    current: bool = True
    indexed: bool = True

    @property
    def family(self) -> str:
        return self.doc_id.rsplit("-", 1)[0]

    @property
    def version(self) -> str:
        return self.doc_id.rsplit("-", 1)[1]

    @property
    def text(self) -> str:
        return " ".join(self.sentences)

    @property
    def source(self) -> str:
        """The source system the document is published from (docs/evidence_diversity.md counts them)."""
        if self.doc_id.startswith("policy/"):
            return "policy-portal"
        return "engineering-wiki" if self.topic == "technical" else "helpcenter"

    def record(self) -> dict:
        """The corpus line of docs/inputs.md."""
        return {
            "doc_id": self.doc_id,
            "family": self.family,
            "version": self.version,
            "current": self.current,
            "indexed": self.indexed,
            "text": self.text,
            "source": self.source,
        }


def _doc(doc_id: str, topic: str, *sentences: str, current: bool = True, indexed: bool = True) -> Doc:
    return Doc(doc_id, topic, tuple(sentences), current, indexed)


# Sentences never hold personal data, abbreviations with dots, or question marks: answers copy them verbatim,
# the claim splitter cuts on sentence ends, and de-identification must leave context text untouched.
DOCS: tuple[Doc, ...] = (
    _doc(
        "policy/refunds-2023",
        "billing",
        "Refund policy, 2023 edition.",
        "Annual plans can be refunded within 60 days of purchase.",
        "Monthly plans can be refunded within 14 days of the charge.",
        "Refunds are returned to the original payment method within 10 business days.",
        "Refunds above 1000 USD need approval from a billing lead.",
        current=False,
    ),
    _doc(
        "policy/refunds-2024",
        "billing",
        "Refund policy, 2024 edition.",
        "Annual plans can be refunded within 30 days of purchase.",
        "Monthly plans can be refunded within 7 days of the charge.",
        "Refunds are returned to the original payment method within 7 business days.",
        "Refunds above 750 USD need approval from a billing lead.",
        current=False,
    ),
    _doc(
        "policy/refunds-2025",
        "billing",
        "Refund policy, effective 1 January 2025.",
        "Annual Starter and Team plans can be refunded within 30 days of purchase.",
        "Annual Business plans, our SMB tier, can be refunded within 14 days of purchase.",
        "Monthly plans can be refunded within 7 days of the charge.",
        "Enterprise contracts are not refundable after signature.",
        "Refunds are returned to the original payment method within 5 business days.",
        "Refunds above 500 USD need approval from a billing lead.",
        "A partial refund is prorated by the unused days of the billing period.",
        "Refunds cannot be sent to a different card or bank account than the one that was charged.",
    ),
    _doc(
        "policy/shipping-2024",
        "shipping",
        "Shipping policy, 2024 edition.",
        "Standard shipping takes 5 to 8 business days.",
        "Express shipping takes 2 business days and costs 15 USD.",
        "Orders over 75 USD ship free with standard shipping.",
        current=False,
    ),
    _doc(
        "policy/shipping-2025",
        "shipping",
        "Shipping policy, effective 1 March 2025.",
        "Standard shipping takes 3 to 5 business days.",
        "Express shipping takes 1 business day and costs 19 USD.",
        "Orders over 50 USD ship free with standard shipping.",
        "We ship hardware to the United States, Canada, the United Kingdom and the European Union.",
        "A lost parcel is replaced once the carrier confirms the loss, which takes up to 10 business days.",
    ),
    _doc(
        "policy/returns-hardware-2024",
        "shipping",
        "Hardware returns policy, 2024 edition.",
        "The X200 router can be returned within 14 days of delivery for a full refund.",
        "A restocking fee of 20 percent applies to X200 routers returned after 14 days.",
        "Opened accessories cannot be returned.",
        current=False,
    ),
    _doc(
        "policy/returns-hardware-2025",
        "shipping",
        "Hardware returns policy, effective 1 January 2025.",
        "The X200 router can be returned within 30 days of delivery for a full refund.",
        "A restocking fee of 15 percent applies to X200 routers returned after 30 days and before 60 days.",
        "The SKU-88-B power adapter can be returned within 30 days only if the box is unopened.",
        "Opened SKU-88-B adapters are exchanged, not refunded.",
        "A prepaid return label is emailed within 1 business day after the return is approved.",
        "Returned hardware must include the original serial label.",
    ),
    _doc(
        "policy/warranty-2025",
        "shipping",
        "Hardware warranty, effective 1 January 2025.",
        "The X200 router has a 2 year limited warranty.",
        "The SKU-88-B power adapter has a 1 year limited warranty.",
        "Warranty claims need the order number and the serial number of the device.",
        "Damage from liquid or drops is not covered by the warranty.",
        "Approved warranty claims are fulfilled with a replacement device within 7 business days.",
    ),
    _doc(
        "policy/cancellation-2025",
        "account",
        "Subscription cancellation policy, effective 1 January 2025.",
        "A subscription can be cancelled at any time from the Billing page or by support.",
        "Cancellation takes effect at the end of the current billing period.",
        "Cancelling a subscription does not close the account or delete its data.",
        "Data of a cancelled workspace stays available in read-only mode for 90 days.",
        "Customers who cancel within 7 days of a monthly charge can ask for a refund under the refund policy.",
    ),
    _doc(
        "policy/account-closure-2025",
        "account",
        "Account closure policy, effective 1 January 2025.",
        "Closing an account is permanent and cannot be undone.",
        "Support may close an account only after the account owner passes identity verification.",
        "All workspace data is deleted 30 days after the account is closed.",
        "An account with an unpaid invoice cannot be closed until the invoice is settled.",
        "Active subscriptions are cancelled automatically when the account is closed.",
    ),
    _doc(
        "policy/identity-verification-2025",
        "account",
        "Identity verification policy, effective 1 January 2025.",
        "Support verifies identity with a one-time code sent to the email address or the phone number on file.",
        "A one-time verification code expires after 10 minutes.",
        "Three failed verification attempts lock verification for 24 hours.",
        "Refunds, account closure and changes of the account email require a verified identity.",
        "Support never asks for a full card number or a password.",
    ),
    _doc(
        "policy/data-retention-2024",
        "account",
        "Data retention policy, 2024 edition.",
        "Deleted files are kept in the trash for 60 days.",
        "Audit logs are kept for 1 year on every plan.",
        current=False,
    ),
    _doc(
        "policy/data-retention-2025",
        "account",
        "Data retention policy, effective 1 January 2025.",
        "Deleted files stay in the trash for 30 days before permanent deletion.",
        "Audit logs are kept for 400 days on Business plans and 7 years on Enterprise plans.",
        "Backups are kept for 35 days.",
        "Chat transcripts with support are kept for 2 years.",
    ),
    _doc(
        "policy/privacy-requests-2025",
        "account",
        "Privacy requests policy, effective 1 January 2025.",
        "A data access request is answered within 30 days.",
        "A data deletion request is completed within 30 days after identity verification.",
        "Privacy requests are submitted through the privacy form in the Trust Center.",
        "Data of customers in the European Union is stored in the Frankfurt region.",
    ),
    _doc(
        "policy/chargebacks-2025",
        "billing",
        "Chargeback policy, effective 1 January 2025.",
        "When a customer opens a chargeback, the workspace is suspended until the dispute is resolved.",
        "A chargeback fee of 25 USD is added to the next invoice if the dispute is lost.",
        "Support cannot refund a payment that is already under a chargeback.",
        "Customers should contact billing support before disputing a charge with their bank.",
    ),
    _doc(
        "policy/price-protection-2025",
        "billing",
        "Price protection policy, effective 1 January 2025.",
        "If a price drops within 14 days of an annual purchase, the difference is returned as account credit.",
        "Price protection does not apply to promotional prices or Black Friday offers.",
        "Account credit from price protection expires after 12 months.",
    ),
    _doc(
        "policy/service-credits-2025",
        "support",
        "Service credit policy, effective 1 January 2025.",
        "Business and Enterprise plans have an uptime commitment of 99.9 percent per calendar month.",
        "If monthly uptime falls below 99.9 percent, the customer receives a credit of 10 percent of the monthly fee.",
        "If monthly uptime falls below 99.0 percent, the credit is 25 percent of the monthly fee.",
        "Service credits must be requested within 30 days after the end of the affected month.",
        "Starter and Team plans are not covered by the uptime commitment.",
    ),
    _doc(
        "policy/support-sla-2025",
        "support",
        "Support response policy, effective 1 January 2025.",
        "Starter plans get a first response within 48 hours by email.",
        "Team plans get a first response within 24 hours.",
        "Business plans get a first response within 8 business hours.",
        "Enterprise plans get a first response within 1 hour for P1 incidents, around the clock.",
        "Phone support is available on Business and Enterprise plans only.",
    ),
    _doc(
        "policy/escalation-2025",
        "support",
        "Escalation policy, effective 1 January 2025.",
        "Agents escalate to a human when a tool fails twice or returns data that cannot be verified.",
        "Security incidents are escalated to the security queue immediately.",
        "Refund disputes above 500 USD are escalated to the billing queue.",
        "An escalated ticket is answered by a human within 4 business hours.",
    ),
    _doc(
        "policy/tax-exemption-2025",
        "billing",
        "Tax exemption policy, effective 1 January 2025.",
        "Tax-exempt organizations must upload a valid exemption certificate before the invoice date.",
        "Exemption certificates are reviewed within 3 business days.",
        "Tax already charged is refunded only for invoices issued in the last 90 days.",
        indexed=False,
    ),
    _doc(
        "policy/education-discount-2025",
        "billing",
        "Education discount policy, effective 1 January 2025.",
        "Students and teachers get 50 percent off Team plans.",
        "The education discount needs a school email address and is renewed every 12 months.",
        "The education discount cannot be combined with other discounts.",
    ),
    _doc(
        "policy/nonprofit-discount-2025",
        "billing",
        "Nonprofit discount policy, effective 1 January 2025.",
        "Registered nonprofits get 30 percent off Business plans.",
        "The nonprofit discount is reviewed once a year.",
    ),
    _doc(
        "policy/gift-cards-2025",
        "billing",
        "Gift card policy, effective 1 January 2025.",
        "Gift cards are valid for 24 months from purchase.",
        "Gift cards cannot be exchanged for cash.",
        "A gift card balance can pay for subscriptions but not for hardware.",
    ),
    _doc(
        "policy/address-change-2025",
        "shipping",
        "Address change policy, effective 1 January 2025.",
        "A shipping address can be changed until the order is packed, usually within 2 hours of purchase.",
        "Address changes after dispatch must be requested from the carrier.",
        "Billing address changes apply from the next invoice.",
    ),
    _doc(
        "kb/plans-2024",
        "billing",
        "Plans and pricing, 2024 edition.",
        "The Starter plan costs 8 USD per user per month.",
        "The Team plan costs 15 USD per user per month.",
        "The Business plan costs 35 USD per user per month.",
        current=False,
    ),
    _doc(
        "kb/plans-2025",
        "billing",
        "Plans and pricing, effective 1 January 2025.",
        "The Starter plan costs 9 USD per user per month and allows up to 5 users.",
        "The Team plan costs 19 USD per user per month with a minimum of 3 users.",
        "The Business plan costs 39 USD per user per month and includes SSO and audit logs.",
        "The Enterprise plan is priced by contract and includes a dedicated account manager.",
        "Annual billing saves 20 percent compared with monthly billing.",
        "Business plans get a first response from support within 8 business hours.",
    ),
    _doc(
        "kb/payment-errors-2025",
        "technical",
        "Payment error codes, updated January 2025.",
        "ERR-4412 means the card was declined by the issuing bank.",
        "For ERR-4412, the customer should contact their bank or use another card.",
        "ERR-4417 means the 3-D Secure check failed or timed out.",
        "ERR-5003 means the payment gateway did not answer in time, and the charge was not made.",
        "A payment that fails three times in a row pauses the subscription after 7 days.",
    ),
    _doc(
        "kb/sync-errors-2025",
        "technical",
        "Sync error codes, updated January 2025.",
        "ERR-7710 means the sync token expired and the user must sign in again.",
        "ERR-7725 means the workspace storage quota is full.",
        "ERR-7731 means a file exceeds the 2 GB upload limit.",
    ),
    _doc(
        "kb/api-rate-limits-2024",
        "technical",
        "API rate limits, 2024 edition.",
        "The API allows 300 requests per minute per workspace.",
        current=False,
    ),
    _doc(
        "kb/api-rate-limits-2025",
        "technical",
        "API rate limits, effective 1 January 2025.",
        "The API allows 600 requests per minute per workspace on Business plans.",
        "Starter and Team plans are limited to 120 requests per minute.",
        "A request over the limit gets HTTP status 429 with a Retry-After header.",
        "Bulk export endpoints count as 10 requests each.",
    ),
    _doc(
        "kb/sso-setup-2025",
        "account",
        "Single sign-on setup guide, updated January 2025.",
        "SAML single sign-on is available on Business and Enterprise plans.",
        "SSO setup needs the identity provider metadata URL and a verified domain.",
        "Domain verification uses a TXT record and usually completes within 1 hour.",
        "SCIM user provisioning is available on Enterprise plans only.",
    ),
    _doc(
        "kb/two-factor-2025",
        "account",
        "Two-factor authentication guide, updated January 2025.",
        "Two-factor authentication supports authenticator apps and hardware security keys.",
        "SMS codes are not offered for two-factor authentication.",
        "Each user gets 10 single-use recovery codes when two-factor authentication is turned on.",
        "Workspace owners can require two-factor authentication for every member.",
    ),
    _doc(
        "kb/password-reset-2025",
        "account",
        "Password reset guide, updated January 2025.",
        "A password reset link is valid for 30 minutes.",
        "Support can send a password reset link but never sets a password for a customer.",
        "After five failed sign-in attempts, the account is locked for 15 minutes.",
    ),
    _doc(
        "kb/data-export-2025",
        "account",
        "Data export guide, updated January 2025.",
        "Workspace owners can export all data as a ZIP archive of CSV and JSON files.",
        "An export link stays valid for 7 days.",
        "Exports larger than 50 GB are split into several archives.",
    ),
    _doc(
        "kb/invoices-2025",
        "billing",
        "Invoices and billing guide, updated January 2025.",
        "Invoices are issued on the first day of each billing period.",
        "Enterprise invoices are payable within 30 days.",
        "Invoices can be downloaded as PDF from the Billing page for 7 years.",
        "A VAT number added to the account appears on invoices from the next billing period.",
    ),
    _doc(
        "kb/x200-troubleshooting-2025",
        "shipping",
        "X200 router troubleshooting guide, updated January 2025.",
        "To factory reset the X200, hold the reset button for 15 seconds until the light blinks amber.",
        "A factory reset erases the Wi-Fi name, the password and all port settings.",
        "The X200 firmware updates itself every night between 2 and 4 in the morning.",
        "A solid red light on the X200 means the device has no internet connection.",
    ),
    _doc(
        "kb/mobile-app-2025",
        "technical",
        "Mobile app guide, updated January 2025.",
        "The mobile app supports iOS 16 and Android 12 or later.",
        "Offline mode keeps the last 500 opened files available without a connection.",
    ),
    _doc(
        "kb/storage-limits-2025",
        "technical",
        "Storage limits, effective 1 January 2025.",
        "The Starter plan includes 10 GB of storage per workspace.",
        "The Team plan includes 100 GB of storage per user.",
        "The Business plan includes 1 TB of storage per user.",
        "Extra storage costs 5 USD per 100 GB per month.",
    ),
    _doc(
        "policy/acceptable-use-2025",
        "account",
        "Acceptable use policy, effective 1 January 2025.",
        "Accounts that send spam or malware are suspended without notice.",
        "Automated scraping of shared pages of other customers is not allowed.",
        "A suspended account can appeal within 14 days.",
    ),
)

DOCS_BY_ID: dict[str, Doc] = {doc.doc_id: doc for doc in DOCS}

# An id that appears in no corpus version: answers cite it to plant a DEAD_CITATION.
DEAD_DOC_ID = "policy/cancellation-2023"


def sentence(doc_id: str, prefix: str) -> str:
    """The one sentence of a document that starts with `prefix` (raises when none or several do)."""
    matches = [s for s in DOCS_BY_ID[doc_id].sentences if s.startswith(prefix)]
    if len(matches) != 1:
        raise KeyError(f"{doc_id}: {len(matches)} sentences start with {prefix!r}")
    return matches[0]
